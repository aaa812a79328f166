//! Timestream's higher-order functions over a time series (an array of `{time,
//! value}` points, so `x.time` and `x.value` inside the lambda) or any array:
//! - `filter(series, x -> predicate)`: the points the predicate is true for, in
//!   order (DataFusion's `array_filter` under Timestream's name); a series filtered to
//!   nothing is an empty series, as Trino's `filter` gives `[]`;
//! - `reduce(series, initial, (s, x) -> next, s -> result)`: the state starts at
//!   `initial`, the input function folds each point into it in time order, and the
//!   output function turns the last state into the result. The state's type is the
//!   input function's result type (`initial` is cast to it, so `reduce(series, 0,
//!   (s, x) -> s + x.value, s -> s)` sums DOUBLEs); a NULL array gives NULL. Both
//!   lambdas may use the row's columns.
//!
//! `reduce` runs point by point across the batch: step `k` evaluates the input
//! function once over the `k`-th point of every row that has one.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, UInt32Array, new_null_array};
use datafusion::arrow::compute::{cast, interleave, take, take_arrays};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err};
use datafusion::error::Result as DfResult;
use datafusion::execution::FunctionRegistry;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::{
    ColumnarValue, HigherOrderFunctionArgs, HigherOrderReturnFieldArgs, HigherOrderSignature,
    HigherOrderUDF, HigherOrderUDFImpl, LambdaArgument, LambdaParametersProgress, ValueOrLambda,
    Volatility,
};

/// The most points of one row `reduce` folds: the index of a point in a batch's step is
/// a 32-bit `take` index.
const MAX_POINTS: usize = u32::MAX as usize;

/// Registers `filter` and `reduce`.
pub(crate) fn register(state: &mut SessionState) -> DfResult<()> {
    let filter = datafusion::functions_nested::array_filter::array_filter_higher_order_function();
    state.register_higher_order_function(Arc::new(
        filter.as_ref().clone().with_aliases(["filter"]),
    ))?;
    state.register_higher_order_function(Arc::new(HigherOrderUDF::from(Reduce::new())))?;
    Ok(())
}

/// `reduce(array, initial, (s, x) -> next, s -> result)`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Reduce {
    signature: HigherOrderSignature,
}

impl Reduce {
    fn new() -> Self {
        Self {
            signature: HigherOrderSignature::exact(
                vec![
                    ValueOrLambda::Value(()),
                    ValueOrLambda::Value(()),
                    ValueOrLambda::Lambda(()),
                    ValueOrLambda::Lambda(()),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

/// The element field of an array field.
fn element(name: &str, list: &Field) -> DfResult<FieldRef> {
    match list.data_type() {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => Ok(f.clone()),
        other => plan_err!("{name} takes an array or a time series first, got {other}"),
    }
}

impl HigherOrderUDFImpl for Reduce {
    fn name(&self) -> &str {
        "reduce"
    }

    fn signature(&self) -> &HigherOrderSignature {
        &self.signature
    }

    fn lambda_parameters(
        &self,
        step: usize,
        fields: &[ValueOrLambda<FieldRef, Option<FieldRef>>],
    ) -> DfResult<LambdaParametersProgress> {
        let name = self.name();
        let [
            ValueOrLambda::Value(list),
            ValueOrLambda::Value(initial),
            ValueOrLambda::Lambda(input),
            ValueOrLambda::Lambda(output),
        ] = fields
        else {
            return plan_err!(
                "{name} takes an array, an initial state, an input function (s, x) -> … and an output function s -> …"
            );
        };
        let element = element(name, list)?;
        let state = |t: &DataType| Arc::new(Field::new("s", t.clone(), true));
        let complete = |t: &DataType| {
            let s = state(t);
            LambdaParametersProgress::Complete(vec![vec![s.clone(), element.clone()], vec![s]])
        };
        // Planning starts with the initial value's type as the state's; if the input
        // function returns another type, it is planned again with that one, and the
        // state settles on what it returns then. Once both are planned, the state is
        // what the input function returns.
        Ok(match (input, output) {
            (Some(body), Some(_)) => complete(body.data_type()),
            (None, _) => LambdaParametersProgress::Partial(vec![
                Some(vec![state(initial.data_type()), element.clone()]),
                None,
            ]),
            (Some(body), None) if step <= 1 && body.data_type() != initial.data_type() => {
                LambdaParametersProgress::Partial(vec![
                    Some(vec![state(body.data_type()), element.clone()]),
                    None,
                ])
            }
            (Some(body), None) => complete(body.data_type()),
        })
    }

    fn coerce_value_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        Ok(arg_types.to_vec())
    }

    fn coerce_values_for_lambdas(
        &self,
        fields: &[ValueOrLambda<DataType, DataType>],
    ) -> DfResult<Option<Vec<DataType>>> {
        // The initial state takes the input function's result type.
        match fields {
            [
                ValueOrLambda::Value(list),
                ValueOrLambda::Value(_),
                ValueOrLambda::Lambda(input),
                ValueOrLambda::Lambda(_),
            ] => Ok(Some(vec![list.clone(), input.clone()])),
            _ => Ok(None),
        }
    }

    fn return_field_from_args(&self, args: HigherOrderReturnFieldArgs) -> DfResult<FieldRef> {
        match args.arg_fields {
            [_, _, _, ValueOrLambda::Lambda(output)] => {
                Ok(Arc::new(Field::new("", output.data_type().clone(), true)))
            }
            _ => plan_err!("{} takes four arguments", self.name()),
        }
    }

    fn invoke_with_args(&self, args: HigherOrderFunctionArgs) -> DfResult<ColumnarValue> {
        let name = self.name();
        let rows = args.number_rows;
        let [
            ValueOrLambda::Value(list),
            ValueOrLambda::Value(initial),
            ValueOrLambda::Lambda(input),
            ValueOrLambda::Lambda(output),
        ] = args.args.as_slice()
        else {
            return exec_err!("{name} takes an array, an initial state and two functions");
        };
        let list = list.to_array(rows)?;
        let state_type = match args.arg_fields.get(2) {
            Some(ValueOrLambda::Lambda(f)) => f.data_type().clone(),
            _ => return exec_err!("{name}: the input function has no type"),
        };
        let mut state = cast(&initial.to_array(rows)?, &state_type)?;
        let (offsets, values) = offsets_and_values(name, &list)?;
        let longest = (0..rows)
            .filter(|&r| list.is_valid(r))
            .map(|r| offsets[r + 1] - offsets[r])
            .max()
            .unwrap_or(0);
        if longest > MAX_POINTS {
            return exec_err!(
                "{name}: an array of {longest} elements is over the limit of {MAX_POINTS}"
            );
        }
        for k in 0..longest {
            let active: Vec<u32> = (0..rows)
                .filter(|&r| list.is_valid(r) && offsets[r] + k < offsets[r + 1])
                .map(|r| r as u32)
                .collect();
            let points: Vec<u32> = active
                .iter()
                .map(|&r| (offsets[r as usize] + k) as u32)
                .collect();
            let (active, points) = (UInt32Array::from(active), UInt32Array::from(points));
            let s = take(&state, &active, None)?;
            let x = take(&values, &points, None)?;
            let next = input
                .evaluate(&[&|| Ok(s.clone()), &|| Ok(x.clone())], |captures| {
                    Ok(take_arrays(captures, &active, None)?)
                })?
                .into_array(active.len())?;
            let next = cast(&next, &state_type)?;
            state = scatter(&state, &next, &active)?;
        }
        let result = evaluate_all(output, &state, rows)?;
        let result = cast(&result, args.return_field.data_type())?;
        // A NULL array reduces to NULL.
        let nulls = new_null_array(result.data_type(), 1);
        let picks: Vec<(usize, usize)> = (0..rows)
            .map(|r| if list.is_valid(r) { (0, r) } else { (1, 0) })
            .collect();
        Ok(ColumnarValue::Array(interleave(
            &[result.as_ref(), nulls.as_ref()],
            &picks,
        )?))
    }
}

/// Each row's start and end in `values` (row `r` spans `offsets[r]..offsets[r + 1]`),
/// and the elements of every row.
fn offsets_and_values(name: &str, list: &ArrayRef) -> DfResult<(Vec<usize>, ArrayRef)> {
    Ok(match list.data_type() {
        DataType::List(_) => {
            let l = list.as_list::<i32>();
            let base = l.offsets().first().copied().unwrap_or(0);
            let offsets = l.offsets().iter().map(|o| (o - base) as usize).collect();
            (offsets, datafusion::common::utils::list_values(list)?)
        }
        DataType::LargeList(_) => {
            let l = list.as_list::<i64>();
            let base = l.offsets().first().copied().unwrap_or(0);
            let offsets = l.offsets().iter().map(|o| (o - base) as usize).collect();
            (offsets, datafusion::common::utils::list_values(list)?)
        }
        other => return exec_err!("{name} takes an array first, got {other}"),
    })
}

/// `state` with row `active[i]` replaced by `next[i]`.
fn scatter(state: &ArrayRef, next: &ArrayRef, active: &UInt32Array) -> DfResult<ArrayRef> {
    let mut picks: Vec<(usize, usize)> = (0..state.len()).map(|r| (0, r)).collect();
    for (i, r) in active.values().iter().enumerate() {
        picks[*r as usize] = (1, i);
    }
    Ok(interleave(&[state.as_ref(), next.as_ref()], &picks)?)
}

/// The output function over every row's final state.
fn evaluate_all(output: &LambdaArgument, state: &ArrayRef, rows: usize) -> DfResult<ArrayRef> {
    output
        .evaluate(&[&|| Ok(state.clone())], |captures| Ok(captures.to_vec()))?
        .into_array(rows)
}
