# help2man.awk: turns a program's --help text (the one source of its
# documentation, see tools/help.c and daemon/conf.c) into a roff man page,
# so the man pages never drift from --help. Input conventions:
#   an unindented line in capitals      -> .SH heading
#   "    -x, --flag ARG   text" or "    --flag ARG" (option line) -> .TP
#   a line indented 8+ spaces after an option line -> its description
#   other indented lines                -> text (blank line = paragraph)
# Variables: name, section, title (one-line description), extra (a file
# whose lines are appended verbatim, roff, e.g. SEE ALSO).
function esc(s) {
	gsub(/\\/, "\\e", s)
	gsub(/^\./, "\\\\\\&.", s)
	gsub(/^'/, "\\\\\\&'", s)
	gsub(/-/, "\\-", s)
	return s
}
BEGIN {
	printf ".TH %s %s \"\" \"gentrace\" \"gentrace manual\"\n", toupper(name), section
	inopt = 0
}
/^[A-Z][A-Z ]+$/ {
	printf ".SH %s\n", $0
	inopt = 0
	next
}
/^$/ { print ".PP"; inopt = 0; next }
/^    -/ {
	line = $0
	sub(/^    /, "", line)
	# "-o, --output OUT  text": flag part up to two spaces, rest text
	n = index(line, "  ")
	if (n > 0) {
		flag = substr(line, 1, n - 1)
		rest = substr(line, n)
		sub(/^ +/, "", rest)
	} else {
		flag = line
		rest = ""
	}
	printf ".TP\n.B %s\n", esc(flag)
	if (rest != "") print esc(rest)
	inopt = 1
	next
}
{
	line = $0
	sub(/^ +/, "", line)
	if (line ~ /^(gentrace|gentraced|curl) / && !inopt) {
		printf ".nf\n%s\n.fi\n", esc(line)
		next
	}
	print esc(line)
}
END {
	if (extra != "") {
		while ((getline l < extra) > 0) print l
	}
}
