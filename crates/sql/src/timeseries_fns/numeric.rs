//! The numeric kernels of the time-series functions, over sorted readings `(time in
//! ns, value)` without NULLs: rates, the trapezoidal integral, Pearson's, Spearman's
//! and Kendall's (tau-b) correlation coefficients, and the natural cubic spline.

/// The rate of change at each reading after the first, per `interval_ns`: `(v_i −
/// v_{i−1}) / ((t_i − t_{i−1}) / interval)`, at `t_i`. Two readings at one time have no
/// rate (the later is left out). `non_negative` leaves out the negative rates.
pub(super) fn derivative(
    points: &[(i64, f64)],
    interval_ns: i64,
    non_negative: bool,
) -> Vec<(i64, f64)> {
    points
        .windows(2)
        .filter_map(|w| {
            let ((t0, v0), (t1, v1)) = (w[0], w[1]);
            let dt = i128::from(t1) - i128::from(t0);
            (dt != 0).then(|| (t1, (v1 - v0) * interval_ns as f64 / dt as f64))
        })
        .filter(|(_, rate)| !non_negative || *rate >= 0.0)
        .collect()
}

/// The area under the readings by the trapezoidal rule, time counted in
/// `interval_ns`; `None` for fewer than two readings.
pub(super) fn trapezoid(points: &[(i64, f64)], interval_ns: i64) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    Some(
        points
            .windows(2)
            .map(|w| {
                let ((t0, v0), (t1, v1)) = (w[0], w[1]);
                let dt = (i128::from(t1) - i128::from(t0)) as f64 / interval_ns as f64;
                (v0 + v1) / 2.0 * dt
            })
            .sum(),
    )
}

/// Pearson's correlation coefficient of the pairs; `None` for fewer than two pairs or
/// when either side does not vary (the coefficient is 0/0).
pub(super) fn pearson(pairs: &[(f64, f64)]) -> Option<f64> {
    if pairs.len() < 2 {
        return None;
    }
    let n = pairs.len() as f64;
    let (mx, my) = pairs
        .iter()
        .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (mx / n, my / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in pairs {
        let (dx, dy) = (x - mx, y - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    // One square root of the product: a series against itself gives exactly 1.
    Some((sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

/// Ranks from 1, ties sharing the mean of their ranks.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i + 1;
        while j < order.len() && values[order[j]] == values[order[i]] {
            j += 1;
        }
        // Ranks i+1 ..= j, mean (i + 1 + j) / 2.
        let mean = (i + 1 + j) as f64 / 2.0;
        for &k in &order[i..j] {
            out[k] = mean;
        }
        i = j;
    }
    out
}

/// Spearman's rank correlation coefficient: Pearson's of the ranks (ties averaged).
pub(super) fn spearman(pairs: &[(f64, f64)]) -> Option<f64> {
    let xs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let ranked: Vec<(f64, f64)> = ranks(&xs).into_iter().zip(ranks(&ys)).collect();
    pearson(&ranked)
}

/// Pairs `t` values that tie among themselves: Σ t(t−1)/2 over runs of equal
/// neighbours in `sorted` (by `same`).
fn tied_pairs<T>(sorted: &[T], same: impl Fn(&T, &T) -> bool) -> u64 {
    let mut total = 0u64;
    let mut run = 1u64;
    for w in sorted.windows(2) {
        if same(&w[0], &w[1]) {
            run += 1;
        } else {
            total += run * (run - 1) / 2;
            run = 1;
        }
    }
    total + run * (run - 1) / 2
}

/// Sorts `ys` by merge sort, counting the swaps (pairs out of order), in O(n log n).
fn merge_count(ys: &mut [f64], scratch: &mut Vec<f64>) -> u64 {
    let n = ys.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let (left, right) = ys.split_at_mut(mid);
    let mut swaps = merge_count(left, scratch) + merge_count(right, scratch);
    scratch.clear();
    let (mut i, mut j) = (0, 0);
    while i < left.len() && j < right.len() {
        if right[j] < left[i] {
            scratch.push(right[j]);
            swaps += (left.len() - i) as u64;
            j += 1;
        } else {
            scratch.push(left[i]);
            i += 1;
        }
    }
    scratch.extend_from_slice(&left[i..]);
    scratch.extend_from_slice(&right[j..]);
    ys.copy_from_slice(scratch);
    swaps
}

/// Kendall's tau-b, with ties in either series (Knight's O(n log n) algorithm):
/// `(concordant − discordant) / sqrt((n0 − n1)(n0 − n2))`, where `n0` is the number of
/// pairs and `n1`, `n2` those tied in x, in y. `None` for fewer than two pairs or
/// when either side does not vary.
pub(super) fn kendall_tau_b(pairs: &[(f64, f64)]) -> Option<f64> {
    let n = pairs.len() as u64;
    if n < 2 {
        return None;
    }
    let mut sorted = pairs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let n0 = n * (n - 1) / 2;
    let n1 = tied_pairs(&sorted, |a, b| a.0 == b.0);
    let joint = tied_pairs(&sorted, |a, b| a.0 == b.0 && a.1 == b.1);
    let mut ys: Vec<f64> = sorted.iter().map(|p| p.1).collect();
    let mut scratch = Vec::with_capacity(ys.len());
    let discordant = merge_count(&mut ys, &mut scratch);
    let n2 = tied_pairs(&ys, |a, b| a == b);
    if n0 == n1 || n0 == n2 {
        return None;
    }
    // Concordant − discordant = n0 − n1 − n2 + joint − 2·swaps.
    let score = n0 as f64 - n1 as f64 - n2 as f64 + joint as f64 - 2.0 * discordant as f64;
    let denominator = ((n0 - n1) as f64 * (n0 - n2) as f64).sqrt();
    Some((score / denominator).clamp(-1.0, 1.0))
}

/// A natural cubic spline through readings (second derivative 0 at both ends).
#[derive(Debug)]
pub(crate) struct Spline {
    /// The first reading's time: the others are kept as seconds after it, where a
    /// double keeps nanoseconds exact over about a hundred days.
    origin: i64,
    xs: Vec<f64>,
    ys: Vec<f64>,
    /// Second derivatives at the readings.
    m: Vec<f64>,
}

/// The fewest readings a spline is fitted to (as Apache Commons Math's
/// `SplineInterpolator` asks); with two the natural spline is the straight line, which
/// `interpolate_linear` already gives.
pub(crate) const SPLINE_MIN_POINTS: usize = 3;

impl Spline {
    /// The spline through `points` (sorted by time, times distinct), or why not.
    pub(crate) fn fit(points: &[(i64, f64)]) -> Result<Self, String> {
        if points.len() < SPLINE_MIN_POINTS {
            return Err(format!(
                "needs at least {SPLINE_MIN_POINTS} points with values, the series has {}",
                points.len()
            ));
        }
        let origin = points[0].0;
        let xs: Vec<f64> = points
            .iter()
            .map(|(t, _)| (i128::from(*t) - i128::from(origin)) as f64 / 1e9)
            .collect();
        let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
        if xs.windows(2).any(|w| w[1] <= w[0]) {
            return Err("needs points at distinct times".to_string());
        }
        let n = xs.len();
        let h: Vec<f64> = xs.windows(2).map(|w| w[1] - w[0]).collect();
        // The tridiagonal system for the inner second derivatives (Thomas algorithm):
        // h[i-1] m[i-1] + 2 (h[i-1] + h[i]) m[i] + h[i] m[i+1] = 6 (slope[i] − slope[i-1]).
        let mut diag = vec![0.0; n];
        let mut rhs = vec![0.0; n];
        for i in 1..n - 1 {
            diag[i] = 2.0 * (h[i - 1] + h[i]);
            rhs[i] = 6.0 * ((ys[i + 1] - ys[i]) / h[i] - (ys[i] - ys[i - 1]) / h[i - 1]);
        }
        for i in 2..n - 1 {
            let w = h[i - 1] / diag[i - 1];
            diag[i] -= w * h[i - 1];
            rhs[i] -= w * rhs[i - 1];
        }
        let mut m = vec![0.0; n];
        for i in (1..n - 1).rev() {
            m[i] = (rhs[i] - h[i] * m[i + 1]) / diag[i];
        }
        Ok(Self { origin, xs, ys, m })
    }

    /// The spline's value at `t`, or `None` outside the readings' time range.
    pub(crate) fn at(&self, t: i64) -> Option<f64> {
        let x = (i128::from(t) - i128::from(self.origin)) as f64 / 1e9;
        let (first, last) = (*self.xs.first()?, *self.xs.last()?);
        if x < first || x > last {
            return None;
        }
        // The segment [xs[i], xs[i+1]] holding x.
        let i = self
            .xs
            .partition_point(|&xi| xi <= x)
            .saturating_sub(1)
            .min(self.xs.len() - 2);
        let (x0, x1) = (self.xs[i], self.xs[i + 1]);
        let (y0, y1) = (self.ys[i], self.ys[i + 1]);
        let (m0, m1) = (self.m[i], self.m[i + 1]);
        let h = x1 - x0;
        let (a, b) = (x1 - x, x - x0);
        Some(
            m0 * a * a * a / (6.0 * h)
                + m1 * b * b * b / (6.0 * h)
                + (y0 / h - m0 * h / 6.0) * a
                + (y1 / h - m1 * h / 6.0) * b,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn rates_per_interval() {
        // 10 → 40 in 30 s is 60 per minute; 40 → 25 in 15 s is −60 per minute.
        let p = [(0, 10.0), (30 * S, 40.0), (45 * S, 25.0), (45 * S, 99.0)];
        assert_eq!(
            derivative(&p, 60 * S, false),
            vec![(30 * S, 60.0), (45 * S, -60.0)]
        );
        assert_eq!(derivative(&p, 60 * S, true), vec![(30 * S, 60.0)]);
        // A flat stretch has rate 0, which the non-negative form keeps.
        assert_eq!(derivative(&[(0, 1.0), (S, 1.0)], S, true), vec![(S, 0.0)]);
        assert!(derivative(&p[..1], S, false).is_empty());
    }

    #[test]
    fn trapezoids_in_units_of_the_interval() {
        // (1+3)/2·2 s + (3+3)/2·1 s = 7 value-seconds; in minutes, 7/60.
        let p = [(0, 1.0), (2 * S, 3.0), (3 * S, 3.0)];
        assert!(close(trapezoid(&p, S), 7.0));
        assert!(close(trapezoid(&p, 60 * S), 7.0 / 60.0));
        assert_eq!(trapezoid(&p[..1], S), None);
        assert_eq!(trapezoid(&[], S), None);
    }

    #[test]
    fn pearson_and_spearman() {
        // y = 2x + 1 exactly, and y = x² (monotone, not linear).
        let line = [(1.0, 3.0), (2.0, 5.0), (3.0, 7.0)];
        assert!(close(pearson(&line), 1.0));
        let square = [(1.0, 1.0), (2.0, 4.0), (3.0, 9.0), (4.0, 16.0)];
        assert!(close(spearman(&square), 1.0));
        // Pearson of x and x²: sxy = 25, sxx = 5, syy = 129 → 25 / sqrt(645).
        assert!(close(pearson(&square), 25.0 / 645f64.sqrt()));
        // Ties share ranks: x ranks 1, 2.5, 2.5, 4; y ranks 1, 2, 3, 4:
        // sxy = 4.5, sxx = 4.5, syy = 5 → 4.5 / sqrt(22.5).
        let tied = [(1.0, 10.0), (2.0, 20.0), (2.0, 30.0), (3.0, 40.0)];
        assert!(close(spearman(&tied), 4.5 / 22.5f64.sqrt()));
        assert_eq!(pearson(&[(1.0, 2.0), (1.0, 3.0)]), None);
        assert_eq!(pearson(&[(1.0, 2.0)]), None);
    }

    #[test]
    fn kendall_tau_b_with_ties() {
        assert!(close(
            kendall_tau_b(&[(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]),
            1.0
        ));
        assert!(close(
            kendall_tau_b(&[(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]),
            -1.0
        ));
        // x = 1 2 2 3, y = 2 3 1 4: of the 6 pairs, (2,3)-(2,1) is tied in x and
        // (1,2)-(2,1) is discordant; concordant 4, discordant 1, n1 = 1, n2 = 0:
        // (4 − 1) / sqrt((6 − 1)(6 − 0)) = 3 / sqrt(30).
        let p = [(1.0, 2.0), (2.0, 3.0), (2.0, 1.0), (3.0, 4.0)];
        assert!(close(kendall_tau_b(&p), 3.0 / 30f64.sqrt()));
        // Ties on both sides: x = 1 1 2 2, y = 1 2 2 3: pairs (1,1)-(1,2) tied in x,
        // (2,2)-(2,3) tied in x, (1,2)-(2,2) tied in y; the other 3 concordant:
        // 3 / sqrt((6 − 2)(6 − 1)) = 3 / sqrt(20).
        let q = [(1.0, 1.0), (1.0, 2.0), (2.0, 2.0), (2.0, 3.0)];
        assert!(close(kendall_tau_b(&q), 3.0 / 20f64.sqrt()));
        // A pair tied on both sides counts in neither: x = 1 1 2, y = 5 5 6 →
        // concordant 2, n1 = n2 = 1: 2 / sqrt(2 · 2) = 1.
        let r = [(1.0, 5.0), (1.0, 5.0), (2.0, 6.0)];
        assert!(close(kendall_tau_b(&r), 1.0));
        assert_eq!(kendall_tau_b(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }

    #[test]
    fn natural_spline() -> Result<(), String> {
        // Through (0,0), (1,1), (2,0): 4·m1 = 6·(−1 − 1), so m1 = −3, and at 0.5:
        // −3·0.125/6 + (1 + 3/6)·0.5 = −0.0625 + 0.75 = 0.6875.
        let p = [(0, 0.0), (S, 1.0), (2 * S, 0.0)];
        let s = Spline::fit(&p)?;
        assert!(close(s.at(S / 2), 0.6875));
        assert!(close(s.at(3 * S / 2), 0.6875));
        assert!(close(s.at(S), 1.0));
        assert!(close(s.at(2 * S), 0.0));
        assert_eq!(s.at(-1), None);
        assert_eq!(s.at(2 * S + 1), None);
        // Readings on a line give the line.
        let line = [(0, 1.0), (S, 3.0), (3 * S, 7.0), (4 * S, 9.0)];
        let s = Spline::fit(&line)?;
        assert!(close(s.at(2 * S), 5.0));
        assert!(Spline::fit(&p[..2]).is_err());
        assert!(Spline::fit(&[(0, 1.0), (0, 2.0), (S, 3.0)]).is_err());
        Ok(())
    }
}
