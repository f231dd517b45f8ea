module gentrace.test/gogen

go 1.19
