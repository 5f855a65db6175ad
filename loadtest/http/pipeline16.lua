-- HTTP/1.1 pipelining: 16 GET requests of the URL's path in each write (as TechEmpower's
-- pipeline.lua). wrk counts the 16 requests in the buffer and expects 16 responses.
init = function(args)
  local r = {}
  for i = 1, 16 do
    r[i] = wrk.format()
  end
  pipelined = table.concat(r)
end

request = function()
  return pipelined
end
