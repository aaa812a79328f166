//! `cf['qualifier']` on a Bigtable family column: the family is a map keyed by bytes,
//! and a string literal names the qualifier by its UTF-8 bytes. DataFusion's own
//! planner would compare the string with the byte keys and fail at run time, so this
//! planner, consulted first, turns the name into a bytes literal.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::expr::GetFieldAccess;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawFieldAccessExpr};

/// Plans string-keyed access into byte-keyed maps.
#[derive(Debug, Default)]
pub struct BytesMapAccess;

fn has_binary_keys(t: &DataType) -> bool {
    let DataType::Map(entries, _) = t else {
        return false;
    };
    let DataType::Struct(fields) = entries.data_type() else {
        return false;
    };
    fields.first().is_some_and(|k| {
        matches!(
            k.data_type(),
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView
        )
    })
}

impl ExprPlanner for BytesMapAccess {
    fn plan_field_access(
        &self,
        expr: RawFieldAccessExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawFieldAccessExpr>> {
        let name = match &expr.field_access {
            GetFieldAccess::NamedStructField {
                name:
                    ScalarValue::Utf8(Some(s))
                    | ScalarValue::Utf8View(Some(s))
                    | ScalarValue::LargeUtf8(Some(s)),
            } => s.as_bytes().to_vec(),
            _ => return Ok(PlannerResult::Original(expr)),
        };
        if !has_binary_keys(&expr.expr.get_type(schema)?) {
            return Ok(PlannerResult::Original(expr));
        }
        Ok(PlannerResult::Planned(
            datafusion::functions::core::expr_fn::get_field(
                expr.expr,
                ScalarValue::Binary(Some(name)),
            ),
        ))
    }
}
