//! Scale expressions: `1`, `2*L`, `1/sqrt(2*L)`, `k^-0.5`, `(2*L)^0.25`, `floor(mix_ratio*L)`.
//!
//! Recipes are data, and their scales depend on depth (`L`), the Transformer-layer index
//! (`k`, 1-based) or the sublayer index (`l`, 1-based), so they are written as small
//! arithmetic expressions evaluated when the recipe is resolved for a given depth. Grammar:
//!
//! ```text
//! cmp   := expr (('<' | '<=' | '>' | '>=') expr)?   -- 1 when true, 0 when false
//! expr  := term (('+' | '-') term)*
//! term  := unary (('*' | '/') unary)*
//! unary := '-' unary | power
//! power := atom ('^' unary)?          -- right-associative, binds tighter than unary minus
//! atom  := number | name | func '(' cmp ')' | '(' cmp ')'
//! func  := sqrt | ln | floor | ceil
//! ```
//!
//! Comparisons give a step in a variable, e.g. DyT's α₀ by width:
//! `0.8*(d <= 4096) + 0.2*(d > 4096)`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The variables a recipe's expressions read: `L`, `d`, `k`, `l` and the recipe's `params`.
pub type Vars = BTreeMap<String, f64>;

/// A scale: a number or an expression in `L`, `k`, `l`, `d` (the hidden size) and the
/// recipe's `params` (see this module).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scale {
    Number(f64),
    Expr(String),
}

impl Scale {
    pub fn expr(s: &str) -> Self {
        Scale::Expr(s.into())
    }

    pub fn text(&self) -> String {
        match self {
            Scale::Number(v) => format!("{v}"),
            Scale::Expr(s) => s.clone(),
        }
    }

    pub fn is_one(&self) -> bool {
        matches!(self, Scale::Number(v) if *v == 1.0) || matches!(self, Scale::Expr(s) if s.trim() == "1")
    }
}

/// A scale's value: a positive finite number, or an expression evaluating to one.
pub fn scale_value(s: &Scale, vars: &Vars) -> anyhow::Result<f64> {
    let v = match s {
        Scale::Number(v) => *v,
        Scale::Expr(e) => eval(e, vars).map_err(anyhow::Error::msg)?,
    };
    match s {
        Scale::Number(_) => anyhow::ensure!(v.is_finite() && v > 0.0, "{v} must be a positive finite number"),
        Scale::Expr(e) => anyhow::ensure!(v.is_finite() && v > 0.0, "`{e}` = {v} must be a positive finite number"),
    }
    Ok(v)
}

/// Evaluates `src` with the given variables. Errors name the offending token.
pub fn eval(src: &str, vars: &BTreeMap<String, f64>) -> Result<f64, String> {
    let tokens = tokenize(src)?;
    let mut p = Parser { tokens: &tokens, pos: 0, vars, depth: 0 };
    let v = p.comparison()?;
    if p.pos != tokens.len() {
        return Err(format!("unexpected `{}` in `{src}`", tokens[p.pos].text()));
    }
    Ok(v)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(char),
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Tok::Num(v) => v.to_string(),
            Tok::Name(n) => n.clone(),
            Tok::Op('≤') => "<=".into(),
            Tok::Op('≥') => ">=".into(),
            Tok::Op(c) => c.to_string(),
        }
    }
}

fn tokenize(src: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.' || is_exponent(&chars, i, start)) {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            out.push(Tok::Num(text.parse().map_err(|_| format!("bad number `{text}` in `{src}`"))?));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Name(chars[start..i].iter().collect()));
        } else if (c == '<' || c == '>') && chars.get(i + 1) == Some(&'=') {
            // `≤`, `≥` stand for the two-character operators inside the parser.
            out.push(Tok::Op(if c == '<' { '≤' } else { '≥' }));
            i += 2;
        } else if "+-*/^()<>".contains(c) {
            out.push(Tok::Op(c));
            i += 1;
        } else {
            return Err(format!("unexpected character `{c}` in `{src}`"));
        }
    }
    Ok(out)
}

/// Scientific notation inside a number: the `e` of `1e-6` and the sign right after it.
fn is_exponent(chars: &[char], i: usize, start: usize) -> bool {
    let c = chars[i];
    let prev = if i > start { chars[i - 1] } else { ' ' };
    (c == 'e' || c == 'E')
        && i > start
        && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit() || *n == '-' || *n == '+')
        || ((c == '-' || c == '+') && (prev == 'e' || prev == 'E'))
}

struct Parser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    vars: &'a BTreeMap<String, f64>,
    /// Nesting of the recursive rules now; bounded so that no input can overflow the stack.
    depth: usize,
}

/// Deeper nesting (parentheses, signs, powers) than any scale needs is refused.
const MAX_DEPTH: usize = 64;

impl Parser<'_> {
    fn peek_op(&self) -> Option<char> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(c)) => Some(*c),
            _ => None,
        }
    }

    fn expect_op(&mut self, c: char) -> Result<(), String> {
        if self.peek_op() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected `{c}`"))
        }
    }

    fn comparison(&mut self) -> Result<f64, String> {
        let left = self.expr()?;
        let Some(op @ ('<' | '>' | '≤' | '≥')) = self.peek_op() else { return Ok(left) };
        self.pos += 1;
        let right = self.expr()?;
        let holds = match op {
            '<' => left < right,
            '>' => left > right,
            '≤' => left <= right,
            _ => left >= right,
        };
        Ok(if holds { 1.0 } else { 0.0 })
    }

    fn expr(&mut self) -> Result<f64, String> {
        let mut v = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek_op() {
            self.pos += 1;
            let r = self.term()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Ok(v)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut v = self.unary()?;
        while let Some(op @ ('*' | '/')) = self.peek_op() {
            self.pos += 1;
            let r = self.unary()?;
            v = if op == '*' { v * r } else { v / r };
        }
        Ok(v)
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("expression nested more than {MAX_DEPTH} deep"));
        }
        let v = if self.peek_op() == Some('-') {
            self.pos += 1;
            self.unary().map(|v| -v)
        } else {
            self.power()
        };
        self.depth -= 1;
        v
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.atom()?;
        if self.peek_op() == Some('^') {
            self.pos += 1;
            let exp = self.unary()?;
            return Ok(base.powf(exp));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<f64, String> {
        let tok = self.tokens.get(self.pos).cloned().ok_or("expression ends too early")?;
        self.pos += 1;
        match tok {
            Tok::Num(v) => Ok(v),
            Tok::Op('(') => {
                let v = self.comparison()?;
                self.expect_op(')')?;
                Ok(v)
            }
            Tok::Name(name) if self.peek_op() == Some('(') => {
                self.pos += 1;
                let arg = self.comparison()?;
                self.expect_op(')')?;
                match name.as_str() {
                    "sqrt" => Ok(arg.sqrt()),
                    "ln" => Ok(arg.ln()),
                    "floor" => Ok(arg.floor()),
                    "ceil" => Ok(arg.ceil()),
                    _ => Err(format!("unknown function `{name}` (known: sqrt, ln, floor, ceil)")),
                }
            }
            Tok::Name(name) => self.vars.get(&name).copied().ok_or_else(|| {
                let known: Vec<&str> = self.vars.keys().map(String::as_str).collect();
                format!("unknown name `{name}` (known: {})", known.join(", "))
            }),
            Tok::Op(c) => Err(format!("unexpected `{c}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, f64> {
        [("L", 12.0), ("k", 4.0), ("mix_ratio", 0.25)].into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn evaluates_the_scales_recipes_use() {
        let v = vars();
        assert_eq!(eval("1", &v).unwrap(), 1.0);
        assert_eq!(eval("2*L", &v).unwrap(), 24.0);
        assert_eq!(eval("1/(2*L)", &v).unwrap(), 1.0 / 24.0);
        assert_eq!(eval("k^-0.5", &v).unwrap(), 0.5);
        assert_eq!(eval("1/sqrt(2*L)", &v).unwrap(), 1.0 / 24f64.sqrt());
        assert_eq!(eval("(2*L)^0.25", &v).unwrap(), 24f64.powf(0.25));
        assert_eq!(eval("floor(mix_ratio*L)", &v).unwrap(), 3.0);
        // Admin's ω for N = 2L = 24 residual branches: √((N+1)/ln(N+1) − 1).
        assert_eq!(eval("ln(2*L+1)", &v).unwrap(), 25f64.ln());
        assert_eq!(eval("L - floor(mix_ratio*L) + 1", &v).unwrap(), 10.0);
        assert_eq!(eval("1e-6 * 2", &v).unwrap(), 2e-6);
        assert_eq!(eval("-2^2", &v).unwrap(), -4.0);
        assert_eq!(eval("2^3^2", &v).unwrap(), 512.0);
    }

    #[test]
    fn comparisons_are_steps() {
        let v = vars();
        assert_eq!(eval("L <= 12", &v).unwrap(), 1.0);
        assert_eq!(eval("L < 12", &v).unwrap(), 0.0);
        assert_eq!(eval("L >= 13", &v).unwrap(), 0.0);
        assert_eq!(eval("L > 2*k", &v).unwrap(), 1.0);
        // A two-row table: 0.8 up to L = 12, 0.2 above.
        assert_eq!(eval("0.8*(L <= 12) + 0.2*(L > 12)", &v).unwrap(), 0.8);
        assert!(eval("L < ", &v).unwrap_err().contains("ends too early"));
        assert!(eval("1 < 2 < 3", &v).unwrap_err().contains("unexpected `<`"));
    }

    #[test]
    fn errors_name_the_problem() {
        let v = vars();
        assert!(eval("2*Q", &v).unwrap_err().contains("unknown name `Q`"));
        assert!(eval("log(2)", &v).unwrap_err().contains("unknown function `log`"));
        assert!(eval("2*", &v).unwrap_err().contains("ends too early"));
        assert!(eval("2 3", &v).unwrap_err().contains("unexpected `3`"));
        assert!(eval("2 # 3", &v).unwrap_err().contains("unexpected character `#`"));
        // Nesting is bounded: no expression can overflow the stack (found by fuzzing).
        assert_eq!(eval(&format!("{}1{}", "(".repeat(60), ")".repeat(60)), &v), Ok(1.0));
        assert!(eval(&format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000)), &v).unwrap_err().contains("nested"));
        assert!(eval(&format!("{}1", "-".repeat(100_000)), &v).unwrap_err().contains("nested"));
    }
}
