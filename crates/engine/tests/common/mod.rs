//! Scratch directories for engine tests, deleted when the test is done with them
//! (a test that fails keeps nothing either: the guard drops while unwinding).
#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::ops::Deref;

use almanac_engine::{Durability, Engine, Options};

/// A fresh, empty directory under the system temp dir, removed on drop.
pub fn scratch(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("almanac-{tag}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("creating a scratch directory for {tag}: {e}"))
}

/// An engine on a scratch directory: closed, then its directory removed, on drop.
pub struct ScratchEngine {
    // Fields drop in order: the engine closes before its directory goes.
    engine: Engine,
    _dir: tempfile::TempDir,
}

impl ScratchEngine {
    /// Opens an engine with `options` on a new scratch directory.
    pub fn open(tag: &str, options: Options) -> Self {
        let dir = scratch(tag);
        let engine = Engine::open(dir.path(), options)
            .unwrap_or_else(|e| panic!("opening an engine for {tag}: {e}"));
        Self { engine, _dir: dir }
    }

    /// Opens an engine under `durability` without the background GC sweep, so a test
    /// sees only what it does itself.
    pub fn quiet(tag: &str, durability: Durability) -> Self {
        Self::open(
            tag,
            Options {
                durability,
                sweep_interval: None,
                ..Options::default()
            },
        )
    }
}

impl Deref for ScratchEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}
