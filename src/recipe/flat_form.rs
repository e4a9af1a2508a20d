//! The single-table form of a recipe that earlier configs and saved runs wrote
//! (`qk_norm = "head"`, `streams = { n = 4, mixing = "mhc" }`, `final_norm = "ln"` at the top of
//! `[recipe]`), translated into the sectioned form of [`super::spec::RecipeSpec`]. Every key of
//! that form has one place in the new one; a key already in the new form passes unchanged.

/// Where a key of the single-table form lives now: its section and field there.
const MOVED: &[(&str, &str, &str)] = &[
    ("norm", "placement", "norm"),
    ("params", "placement", "params"),
    ("sublayer", "placement", "sublayer"),
    ("layers", "placement", "layers"),
    ("taper", "placement", "taper"),
    ("qk_norm", "attention", "qk_norm"),
    ("v_norm", "attention", "v_norm"),
    ("attn_softcap", "attention", "softcap"),
    ("attn_gate", "attention", "gate"),
    ("attn_sink", "attention", "sink"),
    ("value_residual", "attention", "value_residual"),
    ("qk_clip", "attention", "qk_clip"),
    ("x0_mix", "residual", "x0_mix"),
    ("gpas", "residual", "gpas"),
    ("embedding_scale", "embedding", "scale"),
    ("embedding_multiplier", "embedding", "multiplier"),
    ("embedding_norm", "embedding", "norm"),
    ("final_norm", "logits", "norm"),
    ("final_softcap", "logits", "softcap"),
    ("regularizer", "logits", "regularizer"),
];

/// The single-table keys that chose a kind, with the section it is a kind of and how the kind
/// is named (`None`: by the table's `mixing`).
const KINDS: &[(&str, &str, Option<&str>)] = &[
    ("streams", "residual", None),
    ("attn_res", "residual", Some("attn-res")),
    ("hypersphere", "residual", Some("hypersphere")),
    ("moment_control", "init", Some("moment-control")),
    ("completep", "init", Some("completep")),
];

/// `t` with every key of the single-table form moved to its section.
pub fn translate(mut t: toml::Table) -> Result<toml::Table, String> {
    if t.contains_key("notes") {
        return Err("`notes` are facts recorded about a preset as built (`normlab recipes NAME` prints them); \
                    describe a recipe of your own in `about`"
            .into());
    }
    // Kinds first: a kind replaces its section, and the fields moved next belong in it.
    for &(key, section, kind) in KINDS {
        let Some(value) = t.remove(key) else { continue };
        let toml::Value::Table(mut fields) = value else {
            return Err(format!("`{key}` is a table, not `{value}`"));
        };
        let kind = match kind {
            Some(k) => toml::Value::String(k.into()),
            None => fields.remove("mixing").ok_or("`streams` needs a `mixing` (\"hc\", \"mhc\" or \"mhc-lite\")")?,
        };
        fields.insert("kind".into(), kind);
        t.insert(section.into(), toml::Value::Table(fields));
    }
    for &(key, section, field) in MOVED {
        let Some(value) = t.remove(key) else { continue };
        let entry = t.entry(section).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let toml::Value::Table(s) = entry else {
            return Err(format!("`{section}` is a table, not `{entry}`"));
        };
        s.insert(field.into(), value);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    /// Every key of the single-table form, translated by hand into the sectioned form.
    #[test]
    fn the_single_table_form_by_hand() {
        let flat = table(
            "name = \"x\"\nnorm = \"rmsnorm\"\nqk_norm = \"head\"\nattn_softcap = 50.0\nfinal_softcap = 30.0\n\
             final_norm = \"ln\"\nembedding_norm = \"ln\"\nembedding_multiplier = \"sqrt(d)\"\nregularizer = 1.0\n\
             streams = { n = 2, mixing = \"mhc\", sinkhorn_iters = 5 }\ncompletep = { base_layers = 2 }\n\
             [sublayer]\ninput = \"ln\"\n[[layers]]\nrange = \"1\"\nskip = 2.0\n",
        );
        let sectioned = table(
            "name = \"x\"\n[placement]\nnorm = \"rmsnorm\"\nsublayer = { input = \"ln\" }\n\
             layers = [{ range = \"1\", skip = 2.0 }]\n[attention]\nqk_norm = \"head\"\nsoftcap = 50.0\n\
             [residual]\nkind = \"mhc\"\nn = 2\nsinkhorn_iters = 5\n[init]\nkind = \"completep\"\nbase_layers = 2\n\
             [embedding]\nnorm = \"ln\"\nmultiplier = \"sqrt(d)\"\n[logits]\nsoftcap = 30.0\nnorm = \"ln\"\n\
             regularizer = 1.0\n",
        );
        assert_eq!(translate(flat).unwrap(), sectioned);
    }

    /// A table already in the sectioned form passes unchanged; flat keys join its sections.
    #[test]
    fn sections_pass_and_flat_keys_join_them() {
        let new = table("[attention]\nqk_norm = \"full\"\n[residual]\nkind = \"sum\"\ngpas = true\n");
        assert_eq!(translate(new.clone()).unwrap(), new);
        let mixed = table("x0_mix = { x0 = 0.5 }\n[residual]\ngpas = true\n");
        let want = table("[residual]\ngpas = true\nx0_mix = { x0 = 0.5 }\n");
        assert_eq!(translate(mixed).unwrap(), want);
        assert!(translate(table("notes = [\"a\"]")).unwrap_err().contains("about"));
    }
}
