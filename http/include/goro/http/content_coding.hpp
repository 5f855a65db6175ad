// Content codings (RFC 9110 §8.4, §12.5.3): which coding a client's Accept-Encoding
// accepts. Response compression and the file server's precompressed files both ask here.
//
//   static constexpr std::string_view ours[] = {"br", "zstd", "gzip"};
//   auto coding = negotiate_encoding(r.headers().get("Accept-Encoding"), ours);
//   if (coding.empty()) { /* send the body as it is */ }
#pragma once

#include <span>
#include <string_view>

namespace goro::http {

// The weight the Accept-Encoding value gives `coding`, in thousandths (q=0.5 is 500):
// its own entry's, else that of "*", else -1 (not mentioned). Names compare
// case-insensitively and "x-gzip" counts as "gzip". An entry whose q is not a valid
// qvalue is ignored, as is anything after an entry's name that is not a parameter.
int accept_weight(std::string_view accept_encoding, std::string_view coding) noexcept;

// The coding among `offered` (the server's, most preferred first) that accept_encoding
// weighs highest above zero; a tie goes to the earlier one in `offered`. An empty view
// when the client accepts none of them, which includes an empty or absent header:
// the body then goes out as it is, unless identity_acceptable() says otherwise.
std::string_view negotiate_encoding(std::string_view accept_encoding,
                                    std::span<const std::string_view> offered) noexcept;

// Whether the body may go out with no coding: true unless the value says
// "identity;q=0", or "*;q=0" without an entry for identity. Where it is false and
// negotiate_encoding finds nothing, RFC 9110 allows 415-style refusal (406); most
// servers send the body as it is anyway.
bool identity_acceptable(std::string_view accept_encoding) noexcept;

}  // namespace goro::http
