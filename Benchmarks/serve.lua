-- wrk script for `risc bench serve`: POSTs distinct pre-signed SETs, each wrk thread taking
-- its own share of the tokens file (one compact SET per line), so no token is sent twice
-- unless the run outlasts the file. Optional third argument: milliseconds each connection waits
-- between requests (a steady rate of connections × 1000 / delay per second, for the drills).
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  local file = args[1]
  local count = tonumber(args[2])
  tokens = {}
  local index = 0
  for line in io.lines(file) do
    if index % count == id then tokens[#tokens + 1] = line end
    index = index + 1
  end
  position = 0
  -- Whole requests are formatted once, here, so the load generator spends its time sending.
  local headers = { ["Content-Type"] = "application/secevent+jwt", ["Accept"] = "application/json" }
  for i = 1, #tokens do tokens[i] = wrk.format("POST", "/events", headers, tokens[i]) end
  -- wrk asks for delay() and response() only when they exist (a response() would make it parse
  -- every answer's headers); statuses of 400 and up are counted in summary.errors.status anyway.
  local pause = tonumber(args[3] or "0")
  if pause > 0 then delay = function() return pause end end
end

function request()
  position = position + 1
  if position > #tokens then position = 1 end
  return tokens[position]
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d errors_status=%d errors_socket=%d p50_us=%d p99_us=%d max_us=%d\n",
    summary.requests, summary.duration, errors.status, errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
