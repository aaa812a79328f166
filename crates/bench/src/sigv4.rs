//! `almanac-bench sigv4`: what verifying a SigV4 signature costs per WriteRecords
//! request, in process.
//!
//! Steps:
//! 1. Build a WriteRecords body as the TSBS load sends it: `--records` MULTI records of
//!    the cpu table (10 tags as dimensions, 10 DOUBLE measures each).
//! 2. Sign it once with a key pair, as boto3 does (every header signed).
//! 3. `--requests` times, do what the endpoint does for each request: parse the
//!    `Authorization` header, verify the signature (which hashes the body), and admit
//!    it to a replay guard (a fresh signature each time, as every SDK request has);
//!    the process's CPU time divided by the requests is the cost per request. The
//!    body's SHA-256 alone is timed the same way.

use almanac_auth::sigv4::{self, Authorization, ReplayGuard};

use crate::measure::process_cpu_secs;
use crate::tsbs::data::{FIELDS, MEASUREMENT, TAG_KEYS};

/// Flags of `almanac-bench sigv4`.
#[derive(Debug, clap::Args)]
pub struct SigV4Args {
    /// MULTI records per request (TSBS's batch: 100).
    #[arg(long, default_value_t = 100)]
    records: usize,
    /// Requests verified.
    #[arg(long, default_value_t = 20_000)]
    requests: u64,
}

fn body(records: usize) -> String {
    let mut out = String::from(r#"{"DatabaseName":"benchmark","TableName":"cpu","Records":["#);
    for i in 0..records {
        if i > 0 {
            out.push(',');
        }
        let host = format!("host_{i}");
        // One host's tag values, as TSBS writes them.
        let values = [
            host.as_str(),
            "eu-west-1",
            "eu-west-1c",
            "87",
            "Ubuntu16.04LTS",
            "x64",
            "NYC",
            "18",
            "0",
            "production",
        ];
        let dims: Vec<String> = TAG_KEYS
            .iter()
            .zip(values)
            .map(|(k, v)| format!(r#"{{"Name":"{k}","Value":"{v}"}}"#))
            .collect();
        let measures: Vec<String> = FIELDS
            .iter()
            .enumerate()
            .map(|(j, m)| {
                format!(
                    r#"{{"Name":"{m}","Value":"{}.{j}","Type":"DOUBLE"}}"#,
                    10 + j
                )
            })
            .collect();
        out.push_str(&format!(
            r#"{{"Dimensions":[{}],"MeasureName":"{MEASUREMENT}","MeasureValueType":"MULTI","MeasureValues":[{}],"Time":"{}","TimeUnit":"MILLISECONDS"}}"#,
            dims.join(","),
            measures.join(","),
            1_451_606_400_000_u64 + i as u64 * 10_000
        ));
    }
    out.push_str("]}");
    out
}

/// Runs the benchmark (see the module docs).
pub fn run(args: SigV4Args) -> anyhow::Result<()> {
    let body = body(args.records);
    let amz_date = "20261127T080000Z";
    let now = sigv4::parse_amz_date(amz_date).unwrap_or(0);
    let mut headers = vec![
        ("Host", "127.0.0.1:8087"),
        ("X-Amz-Date", amz_date),
        ("X-Amz-Target", "Timestream_20181101.WriteRecords"),
        ("Content-Type", "application/x-amz-json-1.0"),
        (
            "amz-sdk-invocation-id",
            "0f7e6c1a-4f3b-4a53-9d3b-2a6f0e0d1c55",
        ),
        ("amz-sdk-request", "attempt=1; max=3"),
    ];
    let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    let header = sigv4::sign(
        &sigv4::Request {
            method: "POST",
            path: "/",
            query: "",
            headers: &headers,
            body: body.as_bytes(),
        },
        "AKIDEXAMPLE",
        secret,
        "us-east-1",
        "timestream",
        amz_date,
    );
    headers.push(("Authorization", header.as_str()));
    let request = sigv4::Request {
        method: "POST",
        path: "/",
        query: "",
        headers: &headers,
        body: body.as_bytes(),
    };
    let guard = ReplayGuard::default();
    let pid = std::process::id();

    let started = process_cpu_secs(pid)?;
    for i in 0..args.requests {
        let auth = Authorization::parse(&header)?;
        sigv4::verify(&request, &auth, secret, now)?;
        // Each SDK request carries its own signature: admit a distinct one each time.
        let mut signature = auth.signature;
        for (b, x) in signature.iter_mut().zip(i.to_le_bytes()) {
            *b ^= x;
        }
        guard.admit(&signature, now, now)?;
    }
    let verify_us = (process_cpu_secs(pid)? - started) * 1e6 / args.requests as f64;

    let started = process_cpu_secs(pid)?;
    let mut sink = 0u8;
    for _ in 0..args.requests {
        let digest = ring::digest::digest(&ring::digest::SHA256, body.as_bytes());
        sink ^= digest.as_ref()[0];
    }
    let hash_us = (process_cpu_secs(pid)? - started) * 1e6 / args.requests as f64;

    println!(
        "sigv4: WriteRecords body of {} records, {} bytes",
        args.records,
        body.len()
    );
    println!(
        "sigv4: parse + verify + replay check: {verify_us:.1} µs CPU per request ({:.3} µs per point of {} points); the body's SHA-256 alone {hash_us:.1} µs ({sink})",
        verify_us / (args.records * 10) as f64,
        args.records * 10
    );
    Ok(())
}
