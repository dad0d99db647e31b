#include "coordinator/http/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "coordinator/http/api_json.h"
#include "coordinator/http/dashboard_asset.h"
#include "coordinator/http/prometheus_text.h"

namespace memcoord::coordinator {
namespace {

std::int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Compares in time independent of where the strings differ, so response times do not leak the token.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::int64_t IntParam(const httplib::Request& req, const char* name, std::int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  try {
    return std::stoll(req.get_param_value(name));
  } catch (...) {
    return fallback;
  }
}

void Json(httplib::Response& res, const nlohmann::json& body, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(body.dump(), "application/json");
}

void Error(httplib::Response& res, int status, const std::string& message) {
  Json(res, {{"error", message}}, status);
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
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      port_text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoi(port_text) > 65535) {
    return InvalidArgument(fmt::format("HTTP listen address '{}' is not {}", text, accepted));
  }
  out.port = std::stoi(port_text);
  return out;
}

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandlers handlers)
      : options_(options), handlers_(std::move(handlers)), history_(options.history) {}

  Status start() {
    MEMCOORD_ASSIGN_OR_RETURN(HttpListenAddress address, ParseHttpListen(options_.listen));
    const int threads = std::max(2, options_.threads);
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<std::size_t>(threads)); };
    server_.set_read_timeout(2, 0);
    server_.set_write_timeout(2, 0);
    server_.set_keep_alive_timeout(1);  // a browser's idle connection must not hold a pool thread long
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

  void stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    server_.stop();
    if (listener_.joinable()) listener_.join();
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

  bool is_admin(const httplib::Request& req) const {
    if (options_.admin_token.empty()) return false;
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    return header.compare(0, prefix.size(), prefix) == 0 &&
           SameToken(header.substr(prefix.size()), options_.admin_token);
  }

  void routes() {
    server_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(std::string(kDashboardHtml), "text/html; charset=utf-8");
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(RenderPrometheus(handlers_.snapshot()), "text/plain; version=0.0.4; charset=utf-8");
    });
    server_.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    server_.Get("/api/cluster", [this](const httplib::Request&, httplib::Response& res) {
      Json(res, ClusterJson(handlers_.snapshot()));
    });
    server_.Get("/api/events", [this](const httplib::Request& req, httplib::Response& res) {
      Json(res, EventsJson(history_.events(IntParam(req, "since", 0))));
    });
    server_.Get("/api/timeline",
                [this](const httplib::Request& req, httplib::Response& res) { timeline(req, res); });
    server_.Get("/api/session", [this](const httplib::Request& req, httplib::Response& res) {
      Json(res, {{"admin", is_admin(req)}, {"admin_enabled", !options_.admin_token.empty()}});
    });
    server_.Post("/api/trim",
                 [this](const httplib::Request& req, httplib::Response& res) { trim(req, res); });
    server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (res.status == 404 && res.body.empty()) {
        Error(res, 404,
              fmt::format("no such path '{}'; try /, /metrics, /api/cluster, /api/timeline, /api/events",
                          req.path));
      }
    });
  }

  void timeline(const httplib::Request& req, httplib::Response& res) {
    std::vector<int> ranks;
    if (req.has_param("ranks")) {
      std::stringstream list(req.get_param_value("ranks"));
      for (std::string item; std::getline(list, item, ',');) {
        try {
          ranks.push_back(std::stoi(item));
        } catch (...) {
          return Error(res, 400,
                       fmt::format("ranks must be a comma-separated list of integers, got '{}'",
                                   req.get_param_value("ranks")));
        }
      }
    } else {
      ranks = history_.ranks();
    }
    Json(res, TimelineJson(history_, ranks, IntParam(req, "since", 0)));
  }

  void trim(const httplib::Request& req, httplib::Response& res) {
    if (options_.admin_token.empty()) {
      return Error(res, 403, "admin actions over HTTP are off: the coordinator has no admin token");
    }
    if (!is_admin(req)) return Error(res, 401, "this needs 'Authorization: Bearer <admin token>'");
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
  const HttpHandlers handlers_;
  ClusterHistory history_;
  httplib::Server server_;
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
