//! `almanac bench`: benchmarks that print numbers.

/// Flags of `almanac bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Which benchmark: `engine`.
    #[arg(default_value = "engine")]
    which: String,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("benchmark {:?} is not built yet", args.which)
}
