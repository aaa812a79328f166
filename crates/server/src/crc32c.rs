//! CRC-32C (Castagnoli), the checksum ExecuteQuery puts on every batch of rows and
//! Almanac puts on its own query tokens. Table-driven, one byte at a time: batches are
//! a few MiB, so this costs a few milliseconds per batch at most, and needs no crate.

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Remainders of every byte value, built at compile time.
const TABLE: [u32; 256] = table();

const fn table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// The CRC-32C of `bytes`.
pub fn checksum(bytes: &[u8]) -> u32 {
    append(0, bytes)
}

/// The CRC-32C of `a ++ bytes`, given `crc` = the CRC-32C of `a`.
pub fn append(crc: u32, bytes: &[u8]) -> u32 {
    let mut state = !crc;
    for &b in bytes {
        state = TABLE[((state ^ u32::from(b)) & 0xFF) as usize] ^ (state >> 8);
    }
    !state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(checksum(b"123456789"), 0xE306_9283);
        assert_eq!(checksum(b""), 0);
        // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, and of 0xFF.
        assert_eq!(checksum(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(checksum(&[0xFFu8; 32]), 0x62A8_AB43);
    }

    #[test]
    fn appending_equals_checksumming_the_concatenation() {
        let whole = b"the quick brown fox jumps over the lazy dog";
        for split in 0..whole.len() {
            let (a, b) = whole.split_at(split);
            assert_eq!(append(checksum(a), b), checksum(whole), "split at {split}");
        }
    }
}
