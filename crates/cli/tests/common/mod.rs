//! A live `almanac serve` for CLI tests: started on free loopback ports
//! (`--addr 127.0.0.1:0 --timestream-addr 127.0.0.1:0`; the bound addresses are read
//! from its `listening on ADDR` lines), killed if the test stops early.
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_almanac");

/// A running server; killed if the test stops early.
pub struct Server {
    child: Option<Child>,
    /// The gRPC address.
    pub addr: String,
    /// The Timestream endpoint, `http://ADDR`.
    pub ts_url: String,
    dir: PathBuf,
    /// The rest of the server's stderr, gathered by a thread so the pipe never fills.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Server {
    pub fn start(tag: &str) -> Server {
        let dir =
            std::env::temp_dir().join(format!("almanac-cli-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--timestream-addr",
                "127.0.0.1:0",
                "--fsync",
                "buffer",
                "--data-dir",
            ])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn almanac serve");
        let mut stderr = BufReader::new(child.stderr.take().expect("server stderr"));
        let mut line = String::new();
        stderr
            .read_line(&mut line)
            .expect("read the server's first line");
        let addr = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("`listening on ADDR` on the server's stderr")
            .to_string();
        line.clear();
        stderr
            .read_line(&mut line)
            .expect("read the server's second line");
        let ts_url = line
            .split("timestream listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .map(|a| format!("http://{a}"))
            .expect("`timestream listening on ADDR` on the server's stderr");
        let stderr = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            rest
        });
        Server {
            child: Some(child),
            addr,
            ts_url,
            dir,
            stderr: Some(stderr),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Runs `almanac <command> --addr ADDR <args...>` (`ts` commands get `--url`,
    /// `sql` gets `--endpoint`).
    pub fn run(&self, command: &str, args: &[&str]) -> Output {
        self.command(command, args).output().expect("run almanac")
    }

    /// Like [`Server::run`], with `stdin` piped in.
    pub fn run_with_stdin(&self, command: &str, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(command, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn almanac");
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait for almanac")
    }

    fn command(&self, command: &str, args: &[&str]) -> Command {
        let conn: &[&str] = match command {
            "ts" => &["--url", &self.ts_url],
            "sql" => &["--endpoint", &self.ts_url],
            _ => &["--addr", &self.addr],
        };
        let mut cmd = Command::new(BIN);
        cmd.arg(command)
            .args(conn)
            .args(args)
            .env_remove("BIGTABLE_EMULATOR_HOST");
        cmd
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, command: &str, args: &[&str]) -> String {
        let out = self.run(command, args);
        assert!(
            out.status.success(),
            "almanac {command} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }

    /// Runs a command that must fail; returns its stderr.
    pub fn fails(&self, command: &str, args: &[&str]) -> String {
        let out = self.run(command, args);
        assert!(
            !out.status.success(),
            "almanac {command} {args:?} should have failed"
        );
        String::from_utf8(out.stderr).expect("utf-8 output")
    }

    /// Sends SIGTERM and returns the exit status and the server's stderr.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        let mut child = self.child.take().expect("server still running");
        let kill = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(kill.success(), "kill -TERM failed");
        let status = child.wait().expect("wait for the server");
        let stderr = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        (status, stderr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
