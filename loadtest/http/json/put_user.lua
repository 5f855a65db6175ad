-- wrk: PUT /users/1 with a small JSON body (loadtest/http/json/run.sh): the server
-- parses it into a User, stores it and writes the User back.
wrk.method = "PUT"
wrk.body = '{"name":"Ann","email":"ann@example.com"}'
wrk.headers["Content-Type"] = "application/json"
