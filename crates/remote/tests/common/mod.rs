//! What the remote store's integration tests share: a temporary directory, and an
//! Almanac node in this process as the remote Bigtable.
#![allow(dead_code, reason = "each test binary uses part of this")]

use std::net::SocketAddr;
use std::path::PathBuf;

use almanac_engine::Durability;
use almanac_server::{Node, NodeConfig};

/// A temporary directory removed on drop.
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Self {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("almanac-remote-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An Almanac node serving gRPC on a free loopback port, on its own runtime, stopped
/// (before its directory goes) on drop.
pub struct Backend {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    _dir: Dir,
}

impl Backend {
    pub fn start() -> Self {
        let dir = Dir::new("backend");
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
        let node = runtime
            .block_on(Node::start(NodeConfig {
                durability: Durability::None,
                seal_interval: None,
                console_addr: None,
                ..NodeConfig::new(dir.0.clone(), any, any)
            }))
            .expect("start the backend node");
        let addr = node.grpc_addr();
        runtime.spawn(node.run(std::future::pending::<()>()));
        Self {
            addr,
            runtime: Some(runtime),
            _dir: dir,
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
