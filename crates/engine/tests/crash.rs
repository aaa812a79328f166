//! Crash safety: a child process writes rows and reports each acknowledged write;
//! the parent SIGKILLs it at random moments, reopens the data directory and checks
//! that every acknowledged write is there and that no row is torn (each row is
//! written as three cells in one mutation: all three or none).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use almanac_engine::clock::Rng;
use almanac_engine::mutation::Mutation;
use almanac_engine::schema::{FamilySpec, Granularity, TableSpec};
use almanac_engine::{Durability, Engine, Options, ReadRequest};

const I: &str = "projects/p/instances/crash";
const CHILD_ENV: &str = "ALMANAC_CRASH_CHILD_DIR";
/// Kill cycles per run; each reopens the same directory, so damage would accumulate.
const CYCLES: usize = 12;

fn open(dir: &str, durability: Durability) -> Engine {
    Engine::open(
        dir,
        Options {
            durability,
            sweep_interval: None,
            ..Options::default()
        },
    )
    .unwrap()
}

/// The child: writes rows `<cycle>-<n>` forever, printing `ack <key>` after each
/// acknowledged write. Run only by the parent (ignored otherwise).
#[test]
#[ignore = "run by crash_kill_reopen as a child process"]
fn crash_child() {
    let dir = std::env::var(CHILD_ENV).expect("child needs its directory");
    let durability = if std::env::var("ALMANAC_CRASH_BUFFER").is_ok() {
        Durability::Buffer
    } else {
        Durability::Sync
    };
    let engine = open(&dir, durability);
    let spec = TableSpec {
        families: vec![("cf".into(), FamilySpec::default())],
        granularity: Granularity::Micros,
        deletion_protection: false,
        change_retention_us: None,
    };
    let _ = engine.create_table(I, "t", spec);
    let cycle = std::env::var("ALMANAC_CRASH_CYCLE").unwrap();
    let mut n = 0u64;
    loop {
        let key = format!("{cycle}-{n:08}");
        let muts: Vec<Mutation> = ["a", "b", "c"]
            .iter()
            .map(|q| Mutation::SetCell {
                family: "cf".into(),
                qualifier: q.as_bytes().to_vec(),
                timestamp_us: 1,
                value: key.as_bytes().repeat(20),
            })
            .collect();
        engine.mutate_row(I, "t", key.as_bytes(), &muts).unwrap();
        println!("ack {key}");
        n += 1;
    }
}

#[test]
fn crash_kill_reopen() {
    let dir = std::env::temp_dir().join(format!("almanac-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.to_str().unwrap().to_owned();
    let seed: u64 = std::env::var("ALMANAC_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("crash test seed {seed} (set ALMANAC_CRASH_SEED to repeat)");
    let rng = Rng::new(seed);
    let mut acked: Vec<String> = Vec::new();
    for cycle in 0..CYCLES {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--ignored",
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &dir_s)
        .env("ALMANAC_CRASH_CYCLE", format!("{cycle:03}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if cycle % 2 == 1 {
            cmd.env("ALMANAC_CRASH_BUFFER", "1");
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        // Kill after a random number of acknowledgements (or a time limit).
        let kill_after = 20 + (rng.next_u64() % 400) as usize;
        let started = Instant::now();
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        while let Some(Ok(line)) = lines.next() {
            if let Some(k) = line.strip_prefix("ack ") {
                acked.push(k.to_owned());
                seen += 1;
            }
            if seen >= kill_after || started.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL
        // Acks already written to the pipe before the kill also count.
        for line in lines.map_while(Result::ok) {
            if let Some(k) = line.strip_prefix("ack ") {
                acked.push(k.to_owned());
            }
        }
        let _ = child.wait();
        let engine = open(&dir_s, Durability::None);
        let rows: Vec<_> = engine
            .read_rows(I, "t", ReadRequest::default())
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for r in &rows {
            assert_eq!(
                r.cells.len(),
                3,
                "torn row {:?} after cycle {cycle}",
                String::from_utf8_lossy(&r.key)
            );
        }
        let present: std::collections::HashSet<Vec<u8>> = rows.into_iter().map(|r| r.key).collect();
        for k in &acked {
            assert!(
                present.contains(k.as_bytes()),
                "acknowledged row {k} lost after cycle {cycle} (seed {seed})"
            );
        }
        drop(engine);
    }
    eprintln!(
        "{} acknowledged writes over {CYCLES} kills, none lost, none torn",
        acked.len()
    );
    assert!(
        acked.len() > CYCLES * 20,
        "the child wrote too little to test anything: {}",
        acked.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
