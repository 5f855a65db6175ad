// The client's URLs: parse_url (client.hpp) and what following a redirect needs.
#pragma once

#include <string>
#include <string_view>

#include <goro/http/client.hpp>

namespace goro::http::detail {

// The absolute URL that reference ref (a Location) names, relative to base (RFC 3986
// 5.2.2, without fragments).
std::string resolve_reference(const Url& base, std::string_view ref);

// Whether credentials for host `from` may follow a redirect to host `to`: the same
// host, or a subdomain of it (Go's rule).
bool same_or_subdomain(std::string_view to, std::string_view from);

}  // namespace goro::http::detail
