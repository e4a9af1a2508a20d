//! A fine-tuning run's start: the parent's weights as the model's initial values (LoRA's
//! adapters drawn fresh from the run's seed) and the parent's tokenizer, after checking that
//! the run's model is the parent's.

use crate::data::Tokenizer;
use crate::init::ParamSource;
use crate::run::CheckedConfig;
use crate::run::saved::SavedRun;
use anyhow::ensure;

/// The parameter source and tokenizer a fine-tuning run starts from.
pub fn parent_init(cfg: &CheckedConfig, parent: SavedRun) -> anyhow::Result<(ParamSource, Option<Tokenizer>)> {
    let base = |m: &crate::model::ModelConfig| crate::model::ModelConfig {
        lora: None,
        kernels: Default::default(),
        ..m.clone()
    };
    let (mine, theirs) = (base(&cfg.model), base(&parent.cfg.model));
    ensure!(
        mine == theirs,
        "the run's [model] differs from its parent's ({}): fine-tuning keeps the parent's model; change only \
         [model.lora] (and model.kernels)",
        parent.run.display()
    );
    let (mine, theirs) = (cfg.data.tokenizer, parent.cfg.data.tokenizer);
    ensure!(
        mine == theirs,
        "data.tokenizer = \"{}\" differs from the parent's \"{}\" ({}): a fine-tune reads its conversations with its \
         parent's tokenizer, whose ids the parent's embeddings and output layer hold; leave data.tokenizer as the \
         parent has it",
        mine.name(),
        theirs.name(),
        parent.run.display()
    );
    let file = crate::io::tensors::read(&parent.weights)?;
    crate::run::checkpoint::check_finite(&file, &parent.weights)?;
    Ok((ParamSource::Overlay(file.tensors, cfg.train.seed), Some(parent.tokenizer)))
}

#[cfg(test)]
mod tests {
    use crate::data::chat::template::ChatTemplate;
    use crate::data::chat::{Conversation, Message, Role};
    use crate::data::{Tokenizer, TokenizerKind};
    use crate::init::ParamSource;
    use crate::model::{Keep, ModelConfig, Transformer};
    use crate::testutil::{cpu, values};
    use burn::tensor::{Int, Tensor, TensorData};

    /// The loss of a conversation counts the assistant's tokens only: it equals the mean of
    /// `−log softmax(logits)[next token]` over the positions that predict an assistant token,
    /// computed here from the model's logits by hand; the user positions' targets are masked,
    /// and one given a target would count.
    #[test]
    fn only_assistant_tokens_count_in_the_loss() {
        let m = |role, c: &str| Message { role, content: c.into() };
        let conv = Conversation::new(vec![
            m(Role::User, "ab"),
            m(Role::Assistant, "cd"),
            m(Role::User, "ef"),
            m(Role::Assistant, "g"),
        ])
        .unwrap();
        let tok = Tokenizer::fixed(TokenizerKind::Byte).unwrap();
        let e = crate::data::chat::encode::encode(&tok, &ChatTemplate::chatml(), &conv, None).unwrap();
        let b = crate::data::example::batch(&[&e], 0);
        let cfg =
            ModelConfig { vocab_size: 256, d_model: 16, n_layers: 1, n_heads: 2, init_std: 0.3, ..Default::default() };
        let device = cpu();
        let model = Transformer::new(&cfg, ParamSource::Seeded(5), &device).unwrap();
        let ints = |v: &[i64]| Tensor::<2, Int>::from_data(TensorData::new(v.to_vec(), [1, v.len()]), &device);
        let loss = |targets: &[i64]| values(model.loss(ints(&b.inputs), ints(targets), true).0)[0];
        let logits = values(model.forward(ints(&b.inputs), Keep::LOGITS).logits);
        let (mut sum, mut n) = (0.0, 0);
        for j in 0..b.seq_len {
            if !e.is_learned(j + 1) {
                continue;
            }
            let row = &logits[j * 256..(j + 1) * 256];
            let max = row.iter().cloned().fold(f64::MIN, f64::max);
            let lse = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
            sum += lse - row[e.tokens[j + 1] as usize];
            n += 1;
        }
        assert_eq!(n, "cd<|im_end|>\n".len() + "g<|im_end|>\n".len(), "both answers and their end markers");
        let want = sum / n as f64;
        assert!((loss(&b.targets) - want).abs() < 1e-5, "{} vs {want}", loss(&b.targets));
        // A user token's position predicting anything else: it is masked (−1), as is any id.
        let mut other = b.targets.clone();
        let user = (0..b.seq_len).find(|&j| !e.is_learned(j + 1)).unwrap();
        assert_eq!(other[user], -1);
        other[user] = 7;
        assert_ne!(loss(&other), loss(&b.targets), "an unmasked target would count");
    }
}
