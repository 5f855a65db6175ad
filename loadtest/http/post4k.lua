-- POST of a 4 KiB body (Content-Length) to the URL's path, e.g. /echo.
wrk.method = "POST"
wrk.body = string.rep("x", 4096)
wrk.headers["Content-Type"] = "application/octet-stream"
