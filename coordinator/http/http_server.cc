#include "coordinator/http/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <cctype>
#include <charconv>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "common/coordinator_address.h"
#include "common/message_text.h"
#include "coordinator/http/api_json.h"
#include "coordinator/http/bounded_task_queue.h"
#include "coordinator/http/dashboard_asset.h"
#include "coordinator/http/prometheus_text.h"
#include "coordinator/http/request_gate.h"
#include "coordinator/http/request_stream.h"
#include "coordinator/service/access_policy.h"

namespace memcoord::coordinator {
namespace {

std::int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Bytes of a request body read at most (the admin trim's is a few bytes): a longer one is 413 as soon as its
// head says so, before the body is read and before any auth check (the RequestGate refuses it).
constexpr std::size_t kMaxBodyBytes = 64 * 1024;
// Requests received whole, queued for the pool threads before the RequestGate's thread serves one itself
// (bounded_task_queue.h): under that load the gate reads nothing meanwhile, and the accept loop then waits.
constexpr std::size_t kMaxPendingConnections = 64;
// Connections whose request is still arriving, at most (request_gate.h): past that the accept loop waits.
constexpr std::size_t kMaxWaitingConnections = 128;
// Keep-alive: a connection serves at most this many requests, and waits this long for the next one's first
// byte (httplib states both in its Keep-Alive header).
constexpr std::size_t kKeepAliveMaxRequests = 5;
constexpr std::chrono::seconds kKeepAliveIdle{1};
// Writing an answer: all of it within kAnswerDeadline, each write waiting at most kWriteStall for room.
constexpr std::chrono::seconds kAnswerDeadline{10};
constexpr std::chrono::seconds kWriteStall{2};

// httplib's server with its connection handling replaced: every accepted socket goes to `admit` (the
// RequestGate), and serve() answers one request that has already arrived whole, through httplib's own
// parsing, routing and writing.
class GatedServer final : public httplib::Server {
 public:
  std::function<void(int fd)> admit;  // set before listening

  // Answers the request `stream` holds; `last`: the connection closes after it. False when no answer was
  // written whole (or no request line could be read); `client_closes` is set when the request asked to close.
  bool serve(httplib::Stream& stream, bool last, bool& client_closes) {
    return process_request(stream, last, client_closes, nullptr);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    admit(sock);
    return true;
  }
};

// Runs each task at once on the caller, httplib's accept loop: its one task per connection is handing the
// socket to the RequestGate, which blocks only while the gate holds its most connections.
class InlineTaskQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> task) override { task(); }
  void shutdown() override {}
};

// `text` as a whole base-10 integer, or nothing ("5x", "", and values past int64 are not).
std::optional<std::int64_t> WholeInt(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

void Json(httplib::Response& res, const nlohmann::json& body, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  // replace: a string from the request that is not UTF-8 (a path, a parameter quoted in an error) must not
  // make dump() throw; the error handler runs outside httplib's try/catch, so that ended the process.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void Error(httplib::Response& res, int status, const std::string& message) {
  Json(res, {{"error", message}}, status);
}

// The token of an "Authorization: Bearer <token>" header: the scheme's name is case-insensitive (RFC 9110
// 11.1), the token is taken exactly. Nothing without the header or with another scheme.
std::optional<std::string> BearerToken(const httplib::Request& req) {
  if (!req.has_header("Authorization")) return std::nullopt;
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() < kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  }
  return header.substr(kScheme.size());
}

// 401 saying which token is `wanted`. RFC 6750 3: "WWW-Authenticate: Bearer", with error="invalid_token" when
// a bearer token was presented and is not accepted.
void Unauthorized(const httplib::Request& req, httplib::Response& res, std::string_view wanted) {
  res.set_header("WWW-Authenticate", BearerToken(req) ? R"(Bearer realm="memcoord", error="invalid_token")"
                                                      : R"(Bearer realm="memcoord")");
  Error(res, 401, fmt::format("this needs 'Authorization: Bearer <token>' with {}", wanted));
}

httplib::Server::Handler MethodNotAllowed(const char* allowed) {
  return [allowed](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", allowed);
    Error(res, 405,
          fmt::format("{} is not accepted on {}; use {}", ShortForMessage(req.method),
                      ShortForMessage(req.path), allowed));
  };
}

// `name` from the query: `fallback` when absent, false (400 sent) when not a whole integer.
bool IntParam(const httplib::Request& req, httplib::Response& res, const char* name, std::int64_t fallback,
              std::int64_t& out) {
  out = fallback;
  if (!req.has_param(name)) return true;
  const std::string value = req.get_param_value(name);
  if (const auto parsed = WholeInt(value)) {
    out = *parsed;
    return true;
  }
  Error(res, 400, fmt::format("{} must be a whole number, got '{}'", name, ShortForMessage(value)));
  return false;
}

}  // namespace

Result<HttpListenAddress> ParseHttpListen(const std::string& text) {
  const std::string accepted = "PORT, :PORT (loopback), HOST:PORT or [IPV6]:PORT with PORT in [0, 65535]";
  HttpListenAddress out;
  std::string port_text = text;
  const auto colon = text.rfind(':');
  if (colon != std::string::npos) {
    out.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
      out.host = out.host.substr(1, out.host.size() - 2);
    }
  }
  if (out.host.empty()) out.host = "127.0.0.1";
  if (out.host == "localhost") out.host = "127.0.0.1";
  const std::optional<int> port = PortNumber(port_text);
  if (!port) return InvalidArgument(fmt::format("HTTP listen address '{}' is not {}", text, accepted));
  out.port = *port;
  return out;
}

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandlers handlers)
      : options_(options),
        tokens_{options.token, options.admin_token},
        handlers_(std::move(handlers)),
        history_(options.history) {}
  ~Impl() { stop(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Status start() {
    MEMCOORD_ASSIGN_OR_RETURN(HttpListenAddress address, ParseHttpListen(options_.listen));
    MEMCOORD_RETURN_IF_ERROR(start_gate());
    server_.new_task_queue = [] { return new InlineTaskQueue; };
    server_.set_payload_max_length(kMaxBodyBytes);
    server_.set_keep_alive_max_count(kKeepAliveMaxRequests);
    server_.set_keep_alive_timeout(kKeepAliveIdle.count());
    // httplib's default also sets SO_REUSEPORT, which lets a second coordinator bind the same port and
    // steal half the scrapes; SO_REUSEADDR alone still allows a quick restart.
    server_.set_socket_options([](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    routes();
    port_ = address.port == 0 ? server_.bind_to_any_port(address.host)
                              : (server_.bind_to_port(address.host, address.port) ? address.port : -1);
    if (port_ <= 0) {
      return Unavailable(
          fmt::format("cannot listen for HTTP on {}:{} (address in use, or not an address of "
                      "this machine?)",
                      address.host, address.port));
    }
    listener_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    sampler_ = std::thread([this] { sample(); });
    return Status::Ok();
  }

  // The gate first: it frees an accept loop blocked in Admit. Requests already handed to the pool are
  // answered; the connections they would keep alive are closed.
  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (gate_) gate_->Stop();
    server_.stop();
    if (listener_.joinable()) listener_.join();
    if (pool_) pool_->shutdown();
    if (sampler_.joinable()) sampler_.join();
  }

  int port() const { return port_; }
  const ClusterHistory& history() const { return history_; }

 private:
  void sample() {
    std::unique_lock lock(mu_);
    while (!stopped_) {
      lock.unlock();
      history_.observe(handlers_.snapshot(), UnixMs());
      lock.lock();
      cv_.wait_for(lock, options_.sample_period, [this] { return stopped_; });
    }
  }

  // The pool that answers requests, and the gate that hands it only requests received whole.
  Status start_gate() {
    pool_ = std::make_unique<BoundedTaskQueue>(static_cast<std::size_t>(std::max(2, options_.threads)),
                                               kMaxPendingConnections);
    RequestGateOptions gate;
    gate.request_deadline = options_.request_deadline;
    gate.read_stall = options_.read_stall_timeout;
    gate.keep_alive_idle = kKeepAliveIdle;
    gate.limits.max_body_bytes = kMaxBodyBytes;
    gate.max_waiting = kMaxWaitingConnections;
    MEMCOORD_ASSIGN_OR_RETURN(
        gate_,
        RequestGate::Start(gate, [this](std::shared_ptr<HttpConnection> connection, std::size_t bytes) {
          pool_->enqueue([this, connection = std::move(connection), bytes] { serve(connection, bytes); });
        }));
    server_.admit = [this](int fd) { gate_->Admit(fd); };
    return Status::Ok();
  }

  // Answers the request at the front of `connection`'s bytes (`request_bytes` long), on a pool thread; then
  // gives the connection back to the gate to wait for its next request, unless it is to close.
  void serve(const std::shared_ptr<HttpConnection>& connection, std::size_t request_bytes) {
    const std::string_view request = std::string_view(connection->received).substr(0, request_bytes);
    RequestStream stream(connection->fd, request, RequestStream::Clock::now() + kAnswerDeadline, kWriteStall);
    const bool last = ++connection->served >= kKeepAliveMaxRequests || connection->peer_closed;
    bool client_closes = false;
    const bool answered = server_.serve(stream, last, client_closes);
    connection->received.erase(0, request_bytes);
    if (answered && !last && !client_closes) gate_->Return(connection);
  }

  // Which token the request's bearer token is (access_policy.h), if any.
  std::optional<Credential> caller(const httplib::Request& req) const {
    const std::optional<std::string> token = BearerToken(req);
    return token ? PresentedCredential(tokens_, *token) : std::nullopt;
  }
  bool is_admin(const httplib::Request& req) const { return caller(req) == Credential::kAdmin; }

  // `handler` for a caller who may read the cluster: anyone when no token is configured, otherwise one who
  // presents the worker or the admin token. Anyone else gets a 401 naming the token wanted, and no data.
  httplib::Server::Handler reader(httplib::Server::Handler handler) const {
    return [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
      if (tokens_.open() || caller(req)) return handler(req, res);
      Unauthorized(
          req, res,
          options_.token.empty()
              ? "the coordinator's admin token (--admin-token-file)"
              : "the coordinator's worker token (--token-file) or its admin token (--admin-token-file)");
    };
  }

  // The dashboard page and /healthz are open: neither says anything about the cluster.
  void routes() {
    server_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(std::string(kDashboardHtml), "text/html; charset=utf-8");
    });
    server_.Get("/metrics", reader([this](const httplib::Request&, httplib::Response& res) {
                  res.set_content(RenderPrometheus(handlers_.snapshot()),
                                  "text/plain; version=0.0.4; charset=utf-8");
                }));
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    server_.Get("/api/cluster", reader([this](const httplib::Request&, httplib::Response& res) {
                  Json(res, ClusterJson(handlers_.snapshot()));
                }));
    server_.Get("/api/events", reader([this](const httplib::Request& req, httplib::Response& res) {
                  std::int64_t since = 0;
                  if (IntParam(req, res, "since", 0, since)) Json(res, EventsJson(history_.events(since)));
                }));
    server_.Get("/api/timeline",
                reader([this](const httplib::Request& req, httplib::Response& res) { timeline(req, res); }));
    server_.Get("/api/session", reader([this](const httplib::Request& req, httplib::Response& res) {
                  Json(res, {{"admin", is_admin(req)}, {"admin_enabled", !options_.admin_token.empty()}});
                }));
    server_.Post("/api/trim",
                 [this](const httplib::Request& req, httplib::Response& res) { trim(req, res); });
    // The paths served, with their one method: another method on one of them is 405, not 404.
    for (const char* path :
         {"/", "/metrics", "/healthz", "/api/cluster", "/api/events", "/api/timeline", "/api/session"}) {
      server_.Post(path, MethodNotAllowed("GET"));
      server_.Put(path, MethodNotAllowed("GET"));
      server_.Delete(path, MethodNotAllowed("GET"));
    }
    server_.Get("/api/trim", MethodNotAllowed("POST"));
    server_.Put("/api/trim", MethodNotAllowed("POST"));
    server_.Delete("/api/trim", MethodNotAllowed("POST"));
    server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (res.status == 404 && res.body.empty()) {
        Error(res, 404,
              fmt::format("no such path '{}' for {}; try GET /, /metrics, /api/cluster, /api/timeline, "
                          "/api/events, POST /api/trim",
                          ShortForMessage(req.path), ShortForMessage(req.method)));
      } else if (res.status == 413) {
        Error(res, 413, fmt::format("the request body is over {} bytes", kMaxBodyBytes));
      }
    });
  }

  // ?ranks=0,3 (default: every rank in the history), each listed once whatever the query repeats: a rank's
  // series is large, and a URL naming one rank 4,000 times answered 11 MB.
  void timeline(const httplib::Request& req, httplib::Response& res) {
    std::vector<int> ranks;
    if (req.has_param("ranks")) {
      std::set<int> listed;
      std::stringstream list(req.get_param_value("ranks"));
      for (std::string item; std::getline(list, item, ',');) {
        const auto rank = WholeInt(item);
        if (!rank || *rank < 0 || *rank > std::numeric_limits<int>::max()) {
          return Error(res, 400,
                       fmt::format("ranks must be a comma-separated list of ranks (0, 1, ...), got '{}'",
                                   ShortForMessage(req.get_param_value("ranks"))));
        }
        listed.insert(static_cast<int>(*rank));
      }
      ranks.assign(listed.begin(), listed.end());
    } else {
      ranks = history_.ranks();
    }
    std::int64_t since = 0;
    if (IntParam(req, res, "since", 0, since)) Json(res, TimelineJson(history_, ranks, since));
  }

  void trim(const httplib::Request& req, httplib::Response& res) {
    if (options_.admin_token.empty()) {
      return Error(res, 403, "admin actions over HTTP are off: the coordinator has no admin token");
    }
    if (!is_admin(req)) return Unauthorized(req, res, "the coordinator's admin token (--admin-token-file)");
    std::uint64_t target = 0;
    if (!req.body.empty()) {
      const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object() ||
          (body.contains("target_bytes") && !body["target_bytes"].is_number_unsigned())) {
        return Error(res, 400, "the body must be a JSON object like {\"target_bytes\": 0}");
      }
      target = body.value("target_bytes", std::uint64_t{0});
    }
    Result<std::string> outcome = handlers_.trim(target);
    if (!outcome.ok()) return Error(res, 409, outcome.status().message());
    res.set_content(*outcome, "application/json");
  }

  const HttpServerOptions options_;
  const AccessTokens tokens_;  // options_'s two tokens, as access_policy.h takes them
  const HttpHandlers handlers_;
  ClusterHistory history_;
  GatedServer server_;
  std::unique_ptr<BoundedTaskQueue> pool_;  // answers requests; set by start_gate()
  std::unique_ptr<RequestGate> gate_;       // reads them; after pool_, so it is destroyed first
  int port_ = 0;
  std::thread listener_;
  std::thread sampler_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;  // guarded by mu_
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      HttpHandlers handlers) {
  if (!handlers.snapshot) return InvalidArgument("HttpServer needs a snapshot handler");
  if (options.request_deadline.count() <= 0 || options.read_stall_timeout.count() <= 0) {
    return InvalidArgument(fmt::format(
        "HttpServer needs a positive request deadline and read stall timeout, got {} ms and {} ms",
        options.request_deadline.count(), options.read_stall_timeout.count()));
  }
  auto impl = std::make_unique<Impl>(options, std::move(handlers));
  MEMCOORD_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() { Stop(); }
int HttpServer::port() const { return impl_->port(); }
const ClusterHistory& HttpServer::history() const { return impl_->history(); }
void HttpServer::Stop() { impl_->stop(); }

}  // namespace memcoord::coordinator
