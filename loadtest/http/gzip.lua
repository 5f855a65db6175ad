-- A client that takes gzip (the gzip-text scenario): wrk does not decode the body, the
-- bytes on the wire are the compressed ones.
wrk.headers["Accept-Encoding"] = "gzip"
