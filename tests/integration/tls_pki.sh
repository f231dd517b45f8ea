# tls_pki.sh: makes a throwaway PKI with certtool for the TLS tests (sourced
# after lib.sh; never committed, made fresh in $T/pki on every run). Sets C.
#   ca.pem         the test CA            evil.pem   another CA
#   server.pem     gentraced, 127.0.0.1,  server2.pem  the same, reissued
#                  expires in 2 days                   for 30 days
#   agenta.pem     may claim svc-a only   rogue.pem  signed by evil
#   expired.pem    svc-a, expired         (each with NAME.key, mode 600)
C=$T/pki
mkdir -p "$C"
pki_key() {
	certtool --generate-privkey --key-type=ecdsa --outfile "$C/$1.key" \
		>/dev/null 2>&1 || fail "certtool: key $1"
	chmod 600 "$C/$1.key"
}
pki_ca() { # name cn
	pki_key "$1"
	printf 'cn = "%s"\nca\ncert_signing_key\nexpiration_days = 40\n' "$2" \
		>"$C/$1.tmpl"
	certtool --generate-self-signed --load-privkey "$C/$1.key" \
		--template "$C/$1.tmpl" --outfile "$C/$1.pem" >/dev/null 2>&1 ||
		fail "certtool: CA $1"
}
pki_cert() { # name ca template-lines...
	n=$1
	ca=$2
	shift 2
	pki_key "$n"
	printf '%s\n' "$@" >"$C/$n.tmpl"
	certtool --generate-certificate --load-privkey "$C/$n.key" \
		--load-ca-certificate "$C/$ca.pem" --load-ca-privkey "$C/$ca.key" \
		--template "$C/$n.tmpl" --outfile "$C/$n.pem" >/dev/null 2>&1 ||
		fail "certtool: certificate $n"
}
pki_ca ca "gentrace test CA"
pki_ca evil "evil CA"
pki_cert server ca 'cn = "gentraced"' 'ip_address = "127.0.0.1"' \
	'dns_name = "localhost"' tls_www_server 'expiration_days = 2'
pki_cert server2 ca 'cn = "gentraced-2"' 'ip_address = "127.0.0.1"' \
	'dns_name = "localhost"' tls_www_server 'expiration_days = 30'
pki_cert agenta ca 'cn = "agent A"' 'uri = "gentrace:service/svc-a"' \
	tls_www_client 'expiration_days = 2'
pki_cert rogue evil 'cn = "rogue"' tls_www_client 'expiration_days = 2'
pki_cert expired ca 'cn = "expired"' 'uri = "gentrace:service/svc-a"' \
	tls_www_client 'activation_date = "2020-01-01 00:00:00"' \
	'expiration_date = "2020-01-02 00:00:00"'
