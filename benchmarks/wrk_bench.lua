-- The request shapes of benchmarks/http_load.py, for wrk (Debian's `wrk` package).
--
--   wrk -t1 -c16 -d3s -s benchmarks/wrk_bench.lua URL -- MODE TOKEN PREFIX
--
-- MODE "get":  GET the URL's path with `Authorization: Bearer TOKEN` (one request, reused).
-- MODE "send": POST an A2A `message:send` body to the URL's path, same header, with a unique
--              messageId per request (PREFIX-thread-counter) and no contextId, so every
--              request is a new turn in a new conversation (nothing answered from the store).
-- MODE "context": the same, continuing the conversations CONTEXTS (comma-separated contextIds,
--              a fifth argument) in turn, one request each, round robin.
-- Both send `A2A-Version: 1.0` (the a2a-sdk server refuses requests without it).
-- Every response is counted by status; done() prints one line "WRKJSON {...}" that the
-- driver parses: requests, duration, non-2xx responses, socket errors, latency percentiles.

local threads = {}

function setup(thread)
   thread:set("tid", #threads + 1)
   table.insert(threads, thread)
end

function init(args)
   mode, token, prefix = args[1], args[2], args[3]
   contexts = {}
   for context in string.gmatch(args[4] or "", "[^,]+") do
      table.insert(contexts, context)
   end
   non2xx = 0
   counter = 0
   wrk.headers["Authorization"] = "Bearer " .. token
   if mode ~= "get" then
      wrk.method = "POST"
      wrk.headers["Content-Type"] = "application/a2a+json"
      wrk.headers["A2A-Version"] = "1.0"
   end
   fixed = wrk.format()
   head = '{"message":{"messageId":"' .. prefix .. "-" .. tid .. "-"
   tail = '","role":"ROLE_USER","parts":[{"text":"Where is my order A-1001?"}]}}'
end

function request()
   if mode == "get" then
      return fixed
   end
   counter = counter + 1
   if mode == "context" then
      local context = contexts[counter % #contexts + 1]
      return wrk.format(nil, nil, nil,
         head .. counter .. '","contextId":"' .. context .. tail)
   end
   return wrk.format(nil, nil, nil, head .. counter .. tail)
end

function response(status, headers, body)
   if status < 200 or status > 299 then
      non2xx = non2xx + 1
   end
end

function done(summary, latency, requests)
   local bad = 0
   for _, thread in ipairs(threads) do
      bad = bad + thread:get("non2xx")
   end
   local e = summary.errors
   io.write(string.format(
      'WRKJSON {"requests":%d,"duration_us":%d,"non2xx":%d,"connect":%d,"read":%d,' ..
      '"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
      '"mean_us":%.1f,"max_us":%d}\n',
      summary.requests, summary.duration, bad, e.connect, e.read, e.write, e.status,
      e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.mean, latency.max))
end
