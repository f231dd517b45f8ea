module gentrace.test/goreader/oldenc

go 1.22
