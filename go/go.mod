module gentrace

go 1.22
