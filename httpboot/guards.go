package httpboot

import (
	"io"
	"net/http"
)

// Compile-time guards for the optional interfaces that carry behaviour:
// countingWriter must keep io.ReaderFrom (or every image body loses
// sendfile and much of its throughput, see
// httpboot/DESIGN.md#the-sendfile-path) and Unwrap (so
// http.ResponseController reaches the connection for deadlines).
var (
	_ http.ResponseWriter                       = (*countingWriter)(nil)
	_ io.ReaderFrom                             = (*countingWriter)(nil)
	_ interface{ Unwrap() http.ResponseWriter } = (*countingWriter)(nil)
)
