//! Sealed time-series blocks and their summaries as read back from disk
//! (`almanac_timeseries::block`, format in docs/format.md#block-format): header,
//! dictionary, attribute sets, and the integer, float, string and boolean sections
//! over the entropy coder; every decoder (whole points, chosen attributes, columns,
//! times only) and `BlockSummary::decode`.
//!
//! The first byte holds flags: bit 0 the block holds MULTI records; bit 1 which
//! attributes a projecting decoder keeps (names of even or odd length); bit 2 the
//! bytes are a summary instead of a block. The rest are the cell's bytes.
//!
//! Beyond "no panic": a block that decodes and encodes again decodes to the same
//! points (each point's attributes compared in name order: a block keeps a point's
//! attributes in its columns' order, not the order they were written in), and a
//! summary that decodes survives encoding and decoding unchanged.
#![no_main]

use almanac_timeseries::Measures;
use almanac_timeseries::block::{
    BlockPoint, BlockSummary, decode_block, decode_block_columns, decode_block_keeping,
    decode_block_times, encode_block,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    if flags & 4 != 0 {
        if let Ok(summary) = BlockSummary::decode(bytes) {
            let again = BlockSummary::decode(&summary.encode());
            assert_eq!(
                format!("{:?}", again.as_ref().ok()),
                format!("{:?}", Some(&summary)),
                "a summary changed through encode and decode"
            );
        }
        return;
    }
    let multi = flags & 1 != 0;
    let parity = usize::from(flags >> 1 & 1);
    let keep = move |name: &str| name.len() % 2 == parity;
    let _ = decode_block_times(bytes);
    let _ = decode_block_keeping(bytes, multi, &keep);
    let _ = decode_block_columns(bytes, multi, &keep);
    let Ok(points) = decode_block(bytes, multi) else {
        return;
    };
    if let Ok(encoded) = encode_block(&points, multi) {
        let back = decode_block(&encoded, multi);
        // Compared as text: a NaN value equals itself there.
        assert_eq!(
            format!("{:?}", back.map(by_name).ok()),
            format!("{:?}", Some(by_name(points))),
            "points changed through encode and decode"
        );
    }
});

/// The points with each one's attributes in name (then type) order.
fn by_name(mut points: Vec<BlockPoint>) -> Vec<BlockPoint> {
    for p in &mut points {
        if let Measures::Multi(values) = &mut p.measures {
            values.sort_by_cached_key(|(name, value)| (name.clone(), value.kind().as_str()));
        }
    }
    points
}
