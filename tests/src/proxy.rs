//! A TCP forwarder on loopback standing in for a database node that can be
//! lost: [`Proxy::kill`] closes its listener and every connection through
//! it at once (what the kernel does to a `kill -9`ed server's sockets), and
//! [`Proxy::restart`] listens on the same port again.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Forwards `127.0.0.1:port` to a target until killed or dropped.
#[derive(Debug)]
pub struct Proxy {
    target: SocketAddr,
    port: u16,
    /// The accept loop and one task per connection; aborted by `kill`.
    tasks: Option<JoinSet<()>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let mut proxy = Self {
            target,
            port,
            tasks: None,
        };
        proxy.serve(listener);
        proxy
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops listening and closes every forwarded connection.
    pub fn kill(&mut self) {
        if let Some(mut tasks) = self.tasks.take() {
            tasks.abort_all();
        }
    }

    /// Listens on its port again (after [`kill`](Self::kill)).
    pub async fn restart(&mut self) {
        self.kill();
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .expect("bind the proxy's port again");
        self.serve(listener);
    }

    /// One task accepts and owns a set of forwarding tasks: aborting it
    /// drops the set, which aborts every forward (closing both sockets).
    fn serve(&mut self, listener: TcpListener) {
        let target = self.target;
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut forwards = JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                forwards.spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                while forwards.try_join_next().is_some() {}
            }
        });
        self.tasks = Some(tasks);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.kill();
    }
}
