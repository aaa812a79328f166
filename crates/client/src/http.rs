//! A minimal blocking HTTP/1.1 client: POST with a Content-Length body over one
//! keep-alive `TcpStream` (TCP_NODELAY), plain or through TLS (rustls, for `https://`
//! endpoints, trusting the PEM bundle of `$AWS_CA_BUNDLE`, else `$SSL_CERT_FILE`, else
//! the system's), reading responses framed by Content-Length, chunked transfer
//! encoding, or the end of the connection. No redirects.
//!
//! A request on a reused connection that fails before any response byte arrives (the
//! server closed the idle connection) is sent once more on a fresh connection.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use Failure::{Fatal, Stale};

use crate::Error;

/// How long to wait for a response before giving up on the request.
const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest response header line accepted.
const MAX_HEADER_LINE: usize = 64 * 1024;

/// Where requests go: `http[s]://HOST:PORT[/PREFIX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port`, for connecting and for the Host header.
    pub authority: String,
    /// Path prefix without a trailing slash (often empty).
    pub prefix: String,
    /// Whether to speak TLS.
    pub tls: bool,
}

/// The CA bundle an `https://` endpoint is checked against when no variable names one.
const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

impl Endpoint {
    /// Parses `http[s]://host[:port][/prefix]` (port 80, or 443 for https, by default).
    pub fn parse(url: &str) -> Result<Self, Error> {
        let bad = |reason: &str| Error::Address {
            addr: url.to_string(),
            reason: reason.to_string(),
        };
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (_, Some(rest)) => (rest, true),
            _ => return Err(bad("only http:// and https:// URLs are supported")),
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let has_port = match authority.rfind(':') {
            Some(i) => !authority[i..].contains(']'), // not the inside of "[::1]"
            None => false,
        };
        let authority = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{}", if tls { 443 } else { 80 })
        };
        Ok(Self {
            authority,
            prefix: prefix.to_string(),
            tls,
        })
    }

    /// The host part of the authority (for TLS's server name).
    fn host(&self) -> &str {
        let host = match self.authority.rfind(':') {
            Some(i) if !self.authority[i..].contains(']') => &self.authority[..i],
            _ => &self.authority,
        };
        host.trim_start_matches('[').trim_end_matches(']')
    }
}

/// A connection: plain TCP or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Plain(_) => "Stream::Plain",
            Self::Tls(_) => "Stream::Tls",
        })
    }
}

/// The TLS settings of `https://` endpoints: the CA bundle's certificates, ring.
fn tls_config() -> Result<std::sync::Arc<rustls::ClientConfig>, Error> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let path = ["AWS_CA_BUNDLE", "SSL_CERT_FILE"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|p| !p.is_empty()))
        .unwrap_or_else(|| SYSTEM_CA_BUNDLE.to_string());
    let pem = std::fs::read(&path).map_err(|e| io(format!("reading the CA bundle {path}"), e))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| Error::Protocol(format!("CA bundle {path}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::Protocol(format!("CA bundle {path}: {e}")))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Protocol(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(std::sync::Arc::new(config))
}

/// A response: status code and the whole body.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text, lossily.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One keep-alive connection to an [`Endpoint`], opened on first use.
#[derive(Debug)]
pub struct Client {
    endpoint: Endpoint,
    conn: Option<BufReader<Stream>>,
    head: Vec<u8>,
}

impl Client {
    /// A client for `endpoint`; connects lazily.
    pub fn new(endpoint: Endpoint) -> Self {
        Self {
            endpoint,
            conn: None,
            head: Vec::with_capacity(512),
        }
    }

    /// POSTs `body` to the endpoint's prefix followed by `path` (which may carry a
    /// query), with the extra `headers`.
    pub fn post(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, Error> {
        self.send("POST", path, headers, body)
    }

    /// Where requests go.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// GETs the endpoint's prefix followed by `path` (which may carry a query).
    pub fn get(&mut self, path: &str) -> Result<Response, Error> {
        self.send("GET", path, &[], &[])
    }

    /// GETs `path` with the extra `headers`, writing a 200 response's body to `sink`
    /// as it arrives (the returned body is then empty); any other status's body is
    /// returned as usual.
    pub fn get_into(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
        sink: &mut dyn Write,
    ) -> Result<Response, Error> {
        self.send_into("GET", path, headers, &[], Some(sink))
    }

    fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, Error> {
        self.send_into(method, path, headers, body, None)
    }

    fn send_into(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        mut sink: Option<&mut dyn Write>,
    ) -> Result<Response, Error> {
        self.head.clear();
        // Writing into a Vec cannot fail.
        let _ = write!(
            self.head,
            "{method} {}{} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.endpoint.prefix,
            path,
            self.endpoint.authority,
            body.len()
        );
        for (k, v) in headers {
            let _ = write!(self.head, "{k}: {v}\r\n");
        }
        self.head.extend_from_slice(b"\r\n");

        let reused = self.conn.is_some();
        let first = self.exchange(body, sink.as_mut().map(|s| &mut **s as &mut dyn Write));
        match first {
            Ok(r) => Ok(r),
            Err(Stale(first)) if reused => self.exchange(body, sink).map_err(|f| Error::Request {
                request: format!(
                    "retried after a stale connection ({})",
                    crate::with_causes(&first)
                ),
                source: Box::new(f.into_error()),
            }),
            Err(f) => Err(f.into_error()),
        }
        .map_err(|e| Error::Request {
            request: format!(
                "{method} {}://{}{}{path}",
                if self.endpoint.tls { "https" } else { "http" },
                self.endpoint.authority,
                self.endpoint.prefix
            ),
            source: Box::new(e),
        })
    }

    /// Sends the prepared head and `body`, reads the response. Any error drops the
    /// connection; an error before the first response byte is marked stale.
    fn exchange(&mut self, body: &[u8], sink: Option<&mut dyn Write>) -> Result<Response, Failure> {
        let result = self.try_exchange(body, sink);
        match &result {
            Ok((_, keep)) if *keep => {}
            _ => self.conn = None,
        }
        result.map(|(r, _)| r)
    }

    fn try_exchange(
        &mut self,
        body: &[u8],
        sink: Option<&mut dyn Write>,
    ) -> Result<(Response, bool), Failure> {
        if self.conn.is_none() {
            let connecting = || format!("connecting to {}", self.endpoint.authority);
            let stream = TcpStream::connect(&self.endpoint.authority)
                .map_err(|e| Fatal(io(connecting(), e)))?;
            stream
                .set_nodelay(true)
                .and_then(|()| stream.set_read_timeout(Some(READ_TIMEOUT)))
                .map_err(|e| Fatal(io(connecting(), e)))?;
            let stream = if self.endpoint.tls {
                let name =
                    rustls::pki_types::ServerName::try_from(self.endpoint.host().to_string())
                        .map_err(|e| Fatal(Error::Protocol(format!("TLS server name: {e}"))))?;
                let conn = rustls::ClientConnection::new(tls_config().map_err(Fatal)?, name)
                    .map_err(|e| Fatal(Error::Protocol(format!("TLS: {e}"))))?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(conn, stream)))
            } else {
                Stream::Plain(stream)
            };
            self.conn = Some(BufReader::with_capacity(64 * 1024, stream));
        }
        let Some(conn) = self.conn.as_mut() else {
            return Err(Fatal(Error::Protocol("no connection".into())));
        };
        let send = |conn: &mut BufReader<Stream>, head: &[u8]| -> std::io::Result<()> {
            let s = conn.get_mut();
            s.write_all(head)?;
            s.write_all(body)?;
            s.flush()
        };
        send(conn, &self.head).map_err(|e| Stale(io("sending".into(), e)))?;

        // The status line: nothing read yet means the server may have closed the connection.
        let mut line = Vec::new();
        let n = read_line(conn, &mut line).map_err(|e| {
            let timed_out = matches!(
                &e,
                Error::Io { source, .. }
                    if matches!(source.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
            );
            let e = Error::Request {
                request: "reading the status".into(),
                source: Box::new(e),
            };
            if timed_out { Fatal(e) } else { Stale(e) }
        })?;
        if n == 0 {
            return Err(Stale(Error::Protocol(
                "connection closed before a response".into(),
            )));
        }
        let status_line = String::from_utf8_lossy(&line).into_owned();
        let mut parts = status_line.split_whitespace();
        let version = parts.next().unwrap_or_default();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Fatal(Error::Protocol(format!("bad status line {status_line:?}"))))?;
        let mut keep_alive = version != "HTTP/1.0";
        // From here on the server has answered: no failure is retried.

        let mut length: Option<usize> = None;
        let mut chunked = false;
        loop {
            line.clear();
            if read_line(conn, &mut line).map_err(Fatal)? == 0 {
                return Err(Fatal(Error::Protocol(
                    "connection closed inside the headers".into(),
                )));
            }
            if line.is_empty() {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            let Some((name, value)) = text.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "content-length" => {
                    length = Some(value.parse().map_err(|_| {
                        Fatal(Error::Protocol(format!("bad Content-Length {value:?}")))
                    })?);
                }
                "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
                "connection" => {
                    let v = value.to_ascii_lowercase();
                    if v.contains("close") {
                        keep_alive = false;
                    } else if v.contains("keep-alive") {
                        keep_alive = true;
                    }
                }
                _ => {}
            }
        }

        let mut body = Vec::new();
        let out: &mut dyn Write = match sink {
            Some(sink) if status == 200 => sink,
            _ => &mut body,
        };
        let reading = |e| Fatal(io("reading the body".into(), e));
        if status == 204 || status == 304 || (100..200).contains(&status) {
            // No body.
        } else if chunked {
            read_chunked(conn, out).map_err(Fatal)?;
        } else if let Some(n) = length {
            let copied = std::io::copy(&mut conn.by_ref().take(n as u64), out).map_err(reading)?;
            if copied != n as u64 {
                return Err(Fatal(Error::Protocol(format!(
                    "connection closed after {copied} of {n} body bytes"
                ))));
            }
        } else {
            std::io::copy(conn, out).map_err(reading)?;
            keep_alive = false;
        }
        Ok((Response { status, body }, keep_alive))
    }
}

/// Why an exchange failed.
enum Failure {
    /// Before any response byte: the server may have closed an idle connection, and
    /// may not have seen the request; worth one retry on a fresh connection.
    Stale(Error),
    /// Anything else: not retried (the request may have been applied).
    Fatal(Error),
}

impl Failure {
    fn into_error(self) -> Error {
        match self {
            Stale(e) | Fatal(e) => e,
        }
    }
}

/// Reads one CRLF- (or LF-) terminated line into `line` without its terminator;
/// returns the bytes consumed (0 at end of stream).
fn read_line(conn: &mut BufReader<Stream>, line: &mut Vec<u8>) -> Result<usize, Error> {
    line.clear();
    let n = conn
        .by_ref()
        .take(MAX_HEADER_LINE as u64)
        .read_until(b'\n', line)
        .map_err(|e| io("reading a line".into(), e))?;
    if n > 0 && line.last() != Some(&b'\n') {
        return Err(Error::Protocol(format!(
            "header line longer than {MAX_HEADER_LINE} bytes or cut short"
        )));
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(n)
}

fn read_chunked(conn: &mut BufReader<Stream>, body: &mut dyn Write) -> Result<(), Error> {
    let mut line = Vec::new();
    loop {
        if read_line(conn, &mut line)? == 0 {
            return Err(Error::Protocol(
                "connection closed inside a chunked body".into(),
            ));
        }
        let text = String::from_utf8_lossy(&line);
        let size_text = text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| Error::Protocol(format!("bad chunk size {size_text:?}")))?;
        if size == 0 {
            // Trailers, then the empty line.
            loop {
                if read_line(conn, &mut line)? == 0 || line.is_empty() {
                    return Ok(());
                }
            }
        }
        let copied = std::io::copy(&mut conn.by_ref().take(size as u64), body)
            .map_err(|e| io("reading a chunk".into(), e))?;
        if copied != size as u64 {
            return Err(Error::Protocol("connection closed inside a chunk".into()));
        }
        read_line(conn, &mut line)?; // the CRLF after the chunk
    }
}

/// An I/O error with what was being done.
fn io(context: String, source: std::io::Error) -> Error {
    Error::Io { context, source }
}

/// Percent-encodes `s` for a URL query value.
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::net::TcpListener;

    use super::*;

    #[test]
    fn parses_endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8086").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("127.0.0.1:8086", "")
        );
        let e = Endpoint::parse("http://localhost/x/y/").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("localhost:80", "/x/y")
        );
        let e = Endpoint::parse("http://[::1]").unwrap();
        assert_eq!(e.authority, "[::1]:80");
        let e = Endpoint::parse("https://x").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.tls, e.host()),
            ("x:443", true, "x")
        );
        let e = Endpoint::parse("https://[::1]:8087").unwrap();
        assert_eq!((e.host(), e.tls), ("::1", true));
        assert!(!Endpoint::parse("http://x").unwrap().tls);
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http:///x").is_err());
    }

    #[test]
    fn escapes_queries() {
        assert_eq!(
            query_escape("CREATE DATABASE \"b\""),
            "CREATE%20DATABASE%20%22b%22"
        );
    }

    /// Reads one request (head and Content-Length body) from `r`.
    fn read_request(r: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 {
                return None;
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
        Some((head, body))
    }

    #[test]
    fn keeps_the_connection_and_reads_every_framing() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s);
            let mut heads = Vec::new();
            let replies: [&[u8]; 3] = [
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                b"HTTP/1.1 204 No Content\r\n\r\n",
                b"HTTP/1.1 400 Bad\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
            ];
            for reply in replies {
                let (head, body) = read_request(&mut r).unwrap();
                heads.push((head, body));
                r.get_mut().write_all(reply).unwrap();
            }
            // The client stays on this one connection: nothing else is accepted.
            heads
        });
        let mut c = Client::new(Endpoint::parse(&format!("http://{addr}/p")).unwrap());
        let r = c
            .post("/a?b=c", &[("X-Amz-Target", "T.Op")], b"{}")
            .unwrap();
        assert_eq!((r.status, r.text().as_str()), (200, "hello"));
        let r = c.post("/w", &[], b"line").unwrap();
        assert_eq!((r.status, r.body.len()), (204, 0));
        let r = c.post("/w", &[], b"").unwrap();
        assert_eq!((r.status, r.text().as_str()), (400, "abcde"));
        let heads = server.join().unwrap();
        assert!(heads[0].0.starts_with("POST /p/a?b=c HTTP/1.1\r\n"));
        assert!(heads[0].0.contains(&format!("Host: {addr}\r\n")));
        assert!(heads[0].0.contains("X-Amz-Target: T.Op\r\n"));
        assert_eq!(heads[0].1, b"{}");
        assert_eq!(heads[1].1, b"line");
    }

    #[test]
    fn reconnects_when_the_server_closed_an_idle_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for i in 0..2 {
                let (s, _) = listener.accept().unwrap();
                let mut r = BufReader::new(s);
                read_request(&mut r).unwrap();
                let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{i}");
                r.get_mut().write_all(reply.as_bytes()).unwrap();
                // Then close without a Connection: close header.
            }
        });
        let mut c = Client::new(Endpoint::parse(&format!("http://{addr}")).unwrap());
        assert_eq!(c.post("/", &[], b"x").unwrap().text(), "0");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(c.post("/", &[], b"y").unwrap().text(), "1");
        server.join().unwrap();
    }
}
