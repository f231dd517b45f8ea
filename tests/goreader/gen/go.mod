module gentrace.test/goreader/gen

go 1.19
