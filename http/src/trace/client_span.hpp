// The client span of an http::Client call made under a traced context (trace.hpp): the
// call goes out with a child span's traceparent, and the span is reported when it ends.
#pragma once

#include <functional>

#include <goro/http/client.hpp>

namespace goro::http::detail {

// Sends request through send, as a client span when its context carries a trace and the
// request has no traceparent of its own (a proxy passing one on sends it as it is).
Result<ClientResponse> send_in_client_span(
    const ClientRequest& request,
    const std::function<Result<ClientResponse>(const ClientRequest&)>& send);

}  // namespace goro::http::detail
