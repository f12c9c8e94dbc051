"""Golden data for seed 004's self-attention encoder-decoder (noisy squares).

The classes below are copied verbatim from the seed (../shared/seeds/004_*.txt). For each
module: weights, inputs, masks, output, and the gradients of loss = Σ out ⊙ probe with respect
to every parameter and input. Masks are stored in attograd's convention (true = hidden), the
negation of the seed's (true = allowed). Writes tests/golden/seq2seq_<name>.safetensors.
Run: /usr/bin/python3 tools/golden/seq2seq.py
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from golden import golden_path, save, with_grads

# ---- seed 004, verbatim

class Attention(nn.Module):
    def __init__(self, hidden_dim, input_dim=None, proj_values=False):
        super().__init__()
        self.d_k = hidden_dim
        self.input_dim = hidden_dim if input_dim is None else input_dim
        self.proj_values = proj_values
        # Affine transformations for Q, K, and V
        self.linear_query = nn.Linear(self.input_dim, hidden_dim)
        self.linear_key = nn.Linear(self.input_dim, hidden_dim)
        self.linear_value = nn.Linear(self.input_dim, hidden_dim)
        self.alphas = None
                
    def init_keys(self, keys):
        self.keys = keys
        self.proj_keys = self.linear_key(self.keys)
        self.values = self.linear_value(self.keys) \
                      if self.proj_values else self.keys
                
    def score_function(self, query):
        proj_query = self.linear_query(query)
        # scaled dot product
        # N, 1, H x N, H, L -> N, 1, L
        dot_products = torch.bmm(proj_query, self.proj_keys.permute(0, 2, 1))
        scores =  dot_products / np.sqrt(self.d_k)
        return scores
            
    def forward(self, query, mask=None):
        # Query is batch-first N, 1, H
        scores = self.score_function(query) # N, 1, L
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        alphas = F.softmax(scores, dim=-1) # N, 1, L
        self.alphas = alphas.detach()
        
        # N, 1, L x N, L, H -> N, 1, H
        context = torch.bmm(alphas, self.values)
        return context

class MultiHeadAttention(nn.Module):
    def __init__(self, n_heads, d_model, input_dim=None, proj_values=True):
        super().__init__()
        self.linear_out = nn.Linear(n_heads * d_model, d_model)
        self.attn_heads = nn.ModuleList([Attention(d_model, 
                                                   input_dim=input_dim, 
                                                   proj_values=proj_values) 
                                         for _ in range(n_heads)])
        
    def init_keys(self, key):
        for attn in self.attn_heads:
            attn.init_keys(key)
        
    @property
    def alphas(self):
        # Shape: n_heads, N, 1, L (source)
        return torch.stack([attn.alphas for attn in self.attn_heads], dim=0)
        
    def output_function(self, contexts):
        # N, 1, n_heads * D
        concatenated = torch.cat(contexts, axis=-1)
        # Linear transf. to go back to original dimension
        out = self.linear_out(concatenated) # N, 1, D
        return out
        
    def forward(self, query, mask=None):
        contexts = [attn(query, mask=mask) for attn in self.attn_heads]
        out = self.output_function(contexts)
        return out


class EncoderSelfAttn(nn.Module):
    def __init__(self, n_heads, d_model, ff_units, n_features=None):
        super().__init__()
        self.n_heads = n_heads
        self.d_model = d_model
        self.ff_units = ff_units
        self.n_features = n_features
        self.self_attn_heads = MultiHeadAttention(n_heads, d_model, input_dim=n_features)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, ff_units),
            nn.ReLU(),
            nn.Linear(ff_units, d_model),
        )
         
    def forward(self, query, mask=None):
        self.self_attn_heads.init_keys(query)
        att = self.self_attn_heads(query, mask)
        out = self.ffn(att)
        return out


class DecoderSelfAttn(nn.Module):
    def __init__(self, n_heads, d_model, ff_units, n_features=None):
        super().__init__()
        self.n_heads = n_heads
        self.d_model = d_model
        self.ff_units = ff_units
        self.n_features = d_model if n_features is None else n_features
        self.self_attn_heads = MultiHeadAttention(n_heads, d_model, input_dim=self.n_features)
        self.cross_attn_heads = MultiHeadAttention(n_heads, d_model)
        self.ffn = nn.Sequential(
            nn.Linear(d_model, ff_units),
            nn.ReLU(),
            nn.Linear(ff_units, self.n_features),
        )
        
    def init_keys(self, states):
        self.cross_attn_heads.init_keys(states)
         
    def forward(self, query, source_mask=None, target_mask=None):
        self.self_attn_heads.init_keys(query)
        att1 = self.self_attn_heads(query, target_mask)
        att2 = self.cross_attn_heads(att1, source_mask)
        out = self.ffn(att2)
        return out


class EncoderDecoderSelfAttn(nn.Module):
    def __init__(self, encoder, decoder, input_len, target_len):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.input_len = input_len
        self.target_len = target_len
        self.trg_masks = self.subsequent_mask(self.target_len)
        
    @staticmethod
    def subsequent_mask(size):
        attn_shape = (1, size, size)
        subsequent_mask = (1 - torch.triu(torch.ones(attn_shape), diagonal=1))
        return subsequent_mask
                
    def encode(self, source_seq, source_mask):
        # Encodes the source sequence and uses the result
        # to initialize the decoder
        encoder_states = self.encoder(source_seq, source_mask)
        self.decoder.init_keys(encoder_states)
        
    def decode(self, shifted_target_seq, source_mask=None, target_mask=None):
        # Decodes/generates a sequence using the shifted (masked)
        # target sequence - used in TRAIN mode
        outputs = self.decoder(shifted_target_seq, 
                               source_mask=source_mask,
                               target_mask=target_mask)
        return outputs
    
    def predict(self, source_seq, source_mask):
        # Decodes/generates a sequence using one input
        # at a time - used in EVAL mode
        inputs = source_seq[:, -1:]
        for i in range(self.target_len):
            out = self.decode(inputs, source_mask, self.trg_masks[:, :i+1, :i+1])
            out = torch.cat([inputs, out[:, -1:, :]], dim=-2)
            inputs = out.detach()
        outputs = inputs[:, 1:, :]
        return outputs
                
    def forward(self, X, source_mask=None):
        # Sends the mask to the same device as the inputs
        self.trg_masks = self.trg_masks.type_as(X).bool()
        # Slices the input to get source sequence
        source_seq = X[:, :self.input_len, :]
        # Encodes source sequence AND initializes decoder
        self.encode(source_seq, source_mask)
        if self.training:
            # Slices the input to get the shifted target seq
            shifted_target_seq = X[:, self.input_len-1:-1, :]
            # Decodes using the mask to prevent cheating
            outputs = self.decode(shifted_target_seq, source_mask, self.trg_masks)
        else:
            # Decodes using its own predictions
            outputs = self.predict(source_seq, source_mask)
            
        return outputs


# ---- golden data


def subsequent_mask(size):
    return (1 - torch.triu(torch.ones((1, size, size)), diagonal=1)).bool()


def source_mask(lengths, max_len):
    """(N, 1, L) in the seed's convention: true at the real positions of each sequence."""
    return (torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]).unsqueeze(1)


def record(name, module, run, inputs, masks=None, extra=None):
    """run(**inputs, **masks) → out; inputs get gradients, masks (seed convention) do not."""
    masks = masks or {}
    for t in inputs.values():
        t.requires_grad_(True)
    out = run(**inputs, **masks)
    probe = torch.randn(out.shape)
    tensors = {"out": out, "probe": probe}
    if out.requires_grad:
        (out * probe).sum().backward()
        tensors.update(with_grads("grad.param.", module.named_parameters()))
        tensors.update(with_grads("grad.x.", inputs.items()))
    tensors.update({"param." + n: p for n, p in module.state_dict().items()})
    tensors.update({"x." + n: t for n, t in inputs.items()})
    tensors.update({"mask." + n: ~m.bool() for n, m in masks.items()})
    tensors.update(extra(module) if extra else {})
    save(golden_path("seq2seq_" + name), tensors, {"module": repr(module)})


def squares(n, length=4):
    corners = torch.tensor([[-1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [1.0, -1.0]])
    bases = torch.randint(4, (n,))
    seqs = [corners[[(b + i) % 4 for i in range(length)]] for b in bases.tolist()]
    return torch.stack(seqs) + 0.1 * torch.randn(n, length, 2)


def attention_goldens():
    attn = Attention(4, input_dim=2, proj_values=True)
    keys, query = torch.randn(2, 3, 2), torch.randn(2, 2, 2)

    def run(query, keys, mask):
        attn.init_keys(keys)
        return attn(query, mask=mask)

    record("attention", attn, run, {"query": query, "keys": keys}, {"mask": source_mask([3, 2], 3)},
           lambda m: {"alphas": m.alphas})

    plain = Attention(3, input_dim=2)  # proj_values=False: values are the keys, linear_value unused

    def run_plain(query):
        plain.init_keys(query)
        return plain(query)

    record("attention_plain", plain, run_plain, {"query": torch.randn(2, 3, 2)})

    mha = MultiHeadAttention(3, 4, input_dim=2)

    def run_mha(query, keys, mask):
        mha.init_keys(keys)
        return mha(query, mask=mask)

    record("mha", mha, run_mha, {"query": torch.randn(2, 2, 2), "keys": torch.randn(2, 3, 2)},
           {"mask": source_mask([2, 3], 3)}, lambda m: {"alphas": m.alphas})


def encoder_decoder_goldens():
    enc = EncoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2)
    record("encoder", enc, lambda query, mask: enc(query, mask), {"query": torch.randn(3, 3, 2)},
           {"mask": source_mask([3, 2, 1], 3)})

    dec = DecoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2)

    def run_dec(query, states, source_mask, target_mask):
        dec.init_keys(states)
        return dec(query, source_mask=source_mask, target_mask=target_mask)

    record("decoder", dec, run_dec, {"query": torch.randn(3, 2, 2), "states": torch.randn(3, 3, 2)},
           {"source_mask": source_mask([3, 2, 1], 3), "target_mask": subsequent_mask(2)},
           lambda m: {"self_alphas": m.self_attn_heads.alphas, "cross_alphas": m.cross_attn_heads.alphas})

    torch.manual_seed(23)  # the seed's model configuration
    encself = EncoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2)
    decself = DecoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2)
    model = EncoderDecoderSelfAttn(encself, decself, input_len=2, target_len=2)
    full = squares(5)
    model.train()
    record("encdec_train", model, lambda X: model(X), {"X": full})
    model.eval()
    record("encdec_eval", model, lambda X: model(X), {"X": full[:, :2].clone()})


def main():
    torch.manual_seed(0)
    attention_goldens()
    encoder_decoder_goldens()


if __name__ == "__main__":
    main()
