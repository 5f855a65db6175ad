#include "trace/client_span.hpp"

#include <chrono>
#include <string>
#include <string_view>

#include <goro/http/trace.hpp>

namespace goro::http::detail {
namespace {

// A client span's name: the method and the URL without its query ("GET
// http://10.0.0.7:8080/users/7"), which may hold secrets.
std::string client_span_name(const ClientRequest& request) {
  std::string name = request.method;
  name.push_back(' ');
  name.append(std::string_view(request.url).substr(0, request.url.find_first_of("?#")));
  return name;
}

}  // namespace

Result<ClientResponse> send_in_client_span(
    const ClientRequest& request,
    const std::function<Result<ClientResponse>(const ClientRequest&)>& send) {
  const Trace* trace = trace_of(request.context);
  if (trace == nullptr || request.headers.has("traceparent")) return send(request);
  const auto start = std::chrono::system_clock::now();
  const Trace span = child_of(*trace);
  ClientRequest traced = request;
  inject(span, traced.headers);
  Result<ClientResponse> response = send(traced);
  end_span(span, SpanKind::client, client_span_name(request), start,
           response ? response->status : 0, response ? std::error_code() : response.error());
  return response;
}

}  // namespace goro::http::detail
