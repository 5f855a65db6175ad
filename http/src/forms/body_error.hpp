// What a failed body read means for a form: the status and message to answer with.
#pragma once

#include <string>
#include <system_error>

#include <goro/http/form.hpp>

namespace goro::http::detail {

// errc::body_too_large → 413 (the server's max_body_bytes), a timeout → 408, a body cut
// short or malformed → 400. `what` names the reader ("multipart", "form").
FormError body_read_error(std::error_code ec, const char* what);

}  // namespace goro::http::detail
