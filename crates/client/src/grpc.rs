//! gRPC channels to a running server's Bigtable APIs: which server and instance
//! ([`Conn`], shared by every command's flags) and clients with the message limit
//! a whole row needs.

use std::time::Duration;

use almanac_api::google::bigtable::admin::v2::bigtable_table_admin_client::BigtableTableAdminClient;
use almanac_api::google::bigtable::v2::bigtable_client::BigtableClient;
use almanac_engine::limits::MAX_MESSAGE_BYTES;
use tonic::transport::{Channel, Endpoint};

use crate::Error;

/// Where the server listens when neither `--addr` nor `$BIGTABLE_EMULATOR_HOST` says.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8086";

/// How long to wait for the TCP connection before reporting the server unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Which server and instance a command talks to.
#[derive(Debug, Clone, clap::Args)]
pub struct Conn {
    /// Server address host:port. Default: $BIGTABLE_EMULATOR_HOST, else 127.0.0.1:8086.
    #[arg(long)]
    pub addr: Option<String>,
    /// Project of the instance.
    #[arg(long, default_value = "almanac")]
    pub project: String,
    /// Instance holding the tables.
    #[arg(long, default_value = "almanac")]
    pub instance: String,
}

impl Conn {
    /// The address to dial: the flag, else `$BIGTABLE_EMULATOR_HOST`, else the default.
    pub fn addr(&self) -> String {
        if let Some(a) = &self.addr {
            return a.clone();
        }
        match std::env::var("BIGTABLE_EMULATOR_HOST") {
            Ok(a) if !a.is_empty() => a,
            _ => DEFAULT_ADDR.to_string(),
        }
    }

    /// `projects/P/instances/I`.
    pub fn instance_name(&self) -> String {
        format!("projects/{}/instances/{}", self.project, self.instance)
    }

    /// `projects/P/instances/I/tables/T`.
    pub fn table_name(&self, table: &str) -> String {
        format!("{}/tables/{table}", self.instance_name())
    }

    /// Opens one channel to the server (HTTP/2; requests multiplex over it).
    pub async fn channel(&self) -> Result<Channel, Error> {
        connect(&self.addr()).await
    }
}

/// Opens one plain-text HTTP/2 channel to `addr` (`host:port` or a URI).
pub async fn connect(addr: &str) -> Result<Channel, Error> {
    let uri = if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    };
    Endpoint::from_shared(uri)
        .map_err(|e| Error::Address {
            addr: addr.to_string(),
            reason: e.to_string(),
        })?
        .connect_timeout(CONNECT_TIMEOUT)
        .connect()
        .await
        .map_err(|source| Error::Connect {
            addr: addr.to_string(),
            source,
        })
}

/// A data client with the message limits raised to [`MAX_MESSAGE_BYTES`].
pub fn data_client(channel: Channel) -> BigtableClient<Channel> {
    BigtableClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

/// A table-admin client with the message limits raised to [`MAX_MESSAGE_BYTES`].
pub fn admin_client(channel: Channel) -> BigtableTableAdminClient<Channel> {
    BigtableTableAdminClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}
