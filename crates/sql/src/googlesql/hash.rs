//! GoogleSQL's hash functions (GoogleSQL's session only), over STRING (its UTF-8
//! bytes) or BYTES:
//!
//! | function | result |
//! |---|---|
//! | `FARM_FINGERPRINT(v)` | INT64: FarmHash's `Fingerprint64`, as BigQuery and Bigtable compute it |
//! | `MD5(v)`, `SHA1(v)`, `SHA256(v)`, `SHA512(v)` | BYTES: the digest (16, 20, 32, 64 bytes) |

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BinaryBuilder, Int64Array};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::plan_err;
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use sha2::Digest as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    FarmFingerprint,
    Md5,
    Sha1,
    Sha256,
    Sha512,
}

const OPS: [(&str, Op); 5] = [
    ("farm_fingerprint", Op::FarmFingerprint),
    ("md5", Op::Md5),
    ("sha1", Op::Sha1),
    ("sha256", Op::Sha256),
    ("sha512", Op::Sha512),
];

/// Registers the hash functions (over DataFusion's `md5`, which answers in hex).
pub fn register(state: &mut SessionState) -> DfResult<()> {
    for (name, op) in OPS {
        state.register_udf(Arc::new(ScalarUDF::from(HashFn {
            name,
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        })))?;
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct HashFn {
    name: &'static str,
    op: Op,
    signature: Signature,
}

impl ScalarUDFImpl for HashFn {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> DfResult<Vec<DataType>> {
        match args {
            [t] if super::is_text(t) => Ok(vec![DataType::Utf8]),
            [t] if super::is_bytes(t) || t.is_null() => Ok(vec![DataType::Binary]),
            _ => plan_err!("{} takes one STRING or BYTES, got {args:?}", self.name),
        }
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(match self.op {
            Op::FarmFingerprint => DataType::Int64,
            _ => DataType::Binary,
        })
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let op = self.op;
        crate::functions::invoke_rowwise(args, |a, rows| {
            let input = super::Column::of(&a[0])?;
            Ok(match op {
                Op::FarmFingerprint => Arc::new(
                    (0..rows)
                        .map(|i| input.get(i).map(|v| farmhash::fingerprint64(v) as i64))
                        .collect::<Int64Array>(),
                ) as ArrayRef,
                _ => {
                    let mut out = BinaryBuilder::new();
                    for i in 0..rows {
                        match input.get(i) {
                            None => out.append_null(),
                            Some(v) => out.append_value(digest(op, v)),
                        }
                    }
                    Arc::new(out.finish())
                }
            })
        })
    }
}

fn digest(op: Op, v: &[u8]) -> Vec<u8> {
    match op {
        Op::Md5 => md5::Md5::digest(v).to_vec(),
        Op::Sha1 => sha1::Sha1::digest(v).to_vec(),
        Op::Sha256 => sha2::Sha256::digest(v).to_vec(),
        _ => sha2::Sha512::digest(v).to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        // BigQuery's documented FARM_FINGERPRINT of CONCAT('1', 'foo', 'true').
        assert_eq!(
            farmhash::fingerprint64(b"1footrue") as i64,
            -1541654101129638711
        );
        let hex = |b: Vec<u8>| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        assert_eq!(
            hex(digest(Op::Md5, b"")),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        assert_eq!(
            hex(digest(Op::Sha1, b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(digest(Op::Sha256, b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest(Op::Sha512, b"abc").len(), 64);
    }
}
