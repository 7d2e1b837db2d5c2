// Notices an HTTP client that left while its reply is still being computed
// (a non-streaming completion writes nothing until the end, so a failed write
// comes too late: the sequence would run to max_tokens).
//
// cpp-httplib 0.11 hands a handler the connection's two addresses but neither
// its socket nor an is_connection_closed(). A TCP connection is named by
// exactly one (local address, peer address) pair, so the one socket of this
// process with that pair is the request's own; it stays open while the
// handler runs. Only reads are made (getsockname/getpeername, poll, recv with
// MSG_PEEK): no byte of the stream is consumed and the reply is unchanged.
#ifndef KVEDGE_RUNTIME_SERVER_CLIENT_SOCKET_H_
#define KVEDGE_RUNTIME_SERVER_CLIENT_SOCKET_H_

#include <string>

namespace kvedge::server {

// A view of a connection's socket (not owned; httplib closes it after the
// handler). Use it only inside the handler serving that connection, from one
// thread.
class ClientSocket {
 public:
  ClientSocket() = default;
  // The socket of this process whose local and peer addresses are these
  // (numeric host as httplib prints it, port). Not found (none matches, or
  // /proc/self/fd cannot be listed): Gone() is always false, as if the
  // check did not exist. Cost: one getpeername per open descriptor.
  static ClientSocket Find(const std::string& local_addr, int local_port, const std::string& peer_addr,
                           int peer_port);

  bool found() const { return fd_ >= 0; }
  // The descriptor (not owned), or -1 when not found: for reading its
  // options.
  int fd() const { return fd_; }
  // True once the peer closed the connection (only its end of stream is left
  // to read) or reset it. Bytes still unread (a pipelined request) mean it
  // is there. A client that half-closes (shutdown(SHUT_WR)) yet still reads
  // counts as gone; HTTP/1.1 clients do not do that. A peer that vanished
  // without a FIN or RST shows up once the connection's keepalive or user
  // timeout (set by HttpServer on every connection) ends it. Never blocks.
  bool Gone() const;

 private:
  explicit ClientSocket(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_CLIENT_SOCKET_H_
