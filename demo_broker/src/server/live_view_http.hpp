// What the live view's routes (LiveView, LiveViewMembers) share: reading a control's
// fields, and the replies. Pure functions.
#pragma once

#include <string>
#include <utility>

#include "observability/request_fields.hpp"
#include "observability/status_http_server.hpp"

namespace purgatory::broker {

// Throws std::invalid_argument (answer bad_request(e.what())) for a malformed JSON body.
inline RequestFields fields(const HttpRequest& req) {
  return RequestFields(req.query, req.content_type, req.body);
}

// A plain-text answer: `message` and a newline.
inline HttpReply text_reply(unsigned status, std::string message) {
  return HttpReply{status, "text/plain; charset=utf-8", std::move(message) + "\n"};
}

inline HttpReply bad_request(std::string message) {
  return text_reply(400, std::move(message));
}

inline HttpReply json_reply(std::string body, unsigned status = 200) {
  return HttpReply{status, "application/json", std::move(body)};
}

}  // namespace purgatory::broker
