//! Records Almanac reads back from its data directory, each through the decoder the
//! store uses when it opens or reads them:
//!
//! | first byte % 8 | record | decoder |
//! |---|---|---|
//! | 0 | a table (`meta` keyspace, `t` key) | `almanac_engine::decode_table` |
//! | 1 | a saved copy / snapshot (`s` key) | `almanac_engine::decode_saved_copy` |
//! | 2 | a deleted table kept for undelete (`d` key) | `almanac_engine::decode_deleted` |
//! | 3 | a change-stream record (`changes` keyspace) | `almanac_engine::changes::decode` |
//! | 4 | an HLL aggregate cell, and a sketch merged into it | `almanac_engine::aggregate::fold` |
//! | 5 | a time-series database (`_catalog` table, JSON) | `serde_json` into `DatabaseInfo` |
//! | 6 | a time-series table (`_catalog` table, JSON) | `serde_json` into `TableMeta` |
//! | 7 | `DATA_DIR/principals.json` | `almanac_auth::Principals::load` |
//!
//! After the first byte: one byte `n`, then the record's key (`n` bytes, fewer if the
//! input is shorter), then its value (the rest). Kinds 4–7 have no key: 4 takes the
//! key bytes as the stored cell and the value as the merged sketch; 5–7 read the value.
#![no_main]

use almanac_auth::Principals;
use almanac_engine::aggregate::fold;
use almanac_engine::mutation::AggregateInput;
use almanac_engine::schema::Aggregate;
use almanac_timeseries::{DatabaseInfo, TableMeta};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [kind, n, rest @ ..] = data else {
        return;
    };
    let (key, value) = rest.split_at(usize::from(*n).min(rest.len()));
    match kind % 8 {
        0 => {
            if let Ok(meta) = almanac_engine::decode_table(key, value) {
                let _ = meta.info();
            }
        }
        1 => {
            let _ = almanac_engine::decode_saved_copy(key, value);
        }
        2 => {
            let _ = almanac_engine::decode_deleted(key, value);
        }
        3 => {
            let _ = almanac_engine::changes::decode(key, value);
        }
        4 => {
            let merged = AggregateInput::Bytes(value.to_vec());
            let cell = (!key.is_empty()).then_some(key);
            for kind in [Aggregate::HllCountDistinct, Aggregate::Sum, Aggregate::Max] {
                let _ = fold(kind, "f", true, cell, &merged);
                let _ = fold(kind, "f", false, cell, &merged);
            }
        }
        5 => {
            let _ = serde_json::from_slice::<DatabaseInfo>(value);
        }
        6 => {
            if let Ok(meta) = serde_json::from_slice::<TableMeta>(value) {
                let _ = (
                    meta.families(),
                    meta.retention.keep_ns(),
                    meta.layout.validate(),
                );
            }
        }
        _ => {
            let dir = almanac_fuzz::process_dir().join("principals");
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(dir.join(almanac_auth::PRINCIPALS_FILE), value));
            if written.is_ok()
                && let Ok(principals) = Principals::load(&dir)
            {
                for p in principals.all() {
                    let _ = principals.by_access_key(&p.access_key_id);
                }
            }
        }
    }
});
