"""Seed 003's seeded cells run by PyTorch 1.13 (as its code is written), for the walkthrough test.
Keys are "<cell>.<what>" as seeds/walkthrough_003.cpp names its checks.
Writes tests/golden/walkthrough_003.safetensors. Run: /usr/bin/python3 tools/golden/walkthrough_003.py
"""
import torch

import attention
from golden import golden_path, save


class CausalAttentionAsRun(attention.CausalAttention):
    """Seed 003's CausalAttention as its notebook ran it: masked_fill's result dropped (its bug)."""

    def forward(self, x):
        keys, queries, values = self.w_key(x), self.w_query(x), self.w_value(x)
        attn_weights = torch.softmax(queries @ keys.transpose(1, 2) / keys.shape[-1]**0.5, dim=-1)
        return self.dropout(attn_weights) @ values


def main():
    out = {}
    inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                           [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
    x_2 = inputs[1]
    torch.manual_seed(123)
    w_query, w_key, w_value = torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)
    out.update({"In[6].w_query": w_query, "In[6].w_key": w_key, "In[6].w_value": w_value})
    query_2 = x_2 @ w_query
    out.update({"In[7].query_2": query_2, "In[7].key_2": x_2 @ w_key, "In[7].value_2": x_2 @ w_value})
    keys, values, queries = inputs @ w_key, inputs @ w_value, inputs @ w_query
    out["In[9].attn_score_22"] = query_2.dot(keys[1])
    attn_scores_2 = query_2 @ keys.T
    out["In[10].attn_scores_2"] = attn_scores_2
    out["In[11].attn_scores"] = queries @ keys.T
    attn_weights_2 = torch.softmax(attn_scores_2 / 2**0.5, dim=-1)
    out["In[12].attn_weights_2"] = attn_weights_2
    out["In[15].context_vec_2"] = attn_weights_2 @ values
    torch.manual_seed(123)
    out["In[16].SelfAttention_v1"] = attention.SelfAttention_v1(3, 2)(inputs)
    torch.manual_seed(789)
    v2 = attention.SelfAttention_v2(3, 2)
    out["In[17].SelfAttention_v2"] = v2(inputs)
    queries, keys = v2.w_query(inputs), v2.w_key(inputs)
    attn_scores = queries @ keys.T
    attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
    out["In[18].attn_weights"] = attn_weights
    masked_simple = torch.tril(torch.ones(6, 6)) * attn_weights
    out["In[20].masked_simple"] = masked_simple
    out["In[21].masked_simple_norm"] = masked_simple / masked_simple.sum(dim=1, keepdim=True)
    out["In[22].attn_scores"] = attn_scores
    masked = attn_scores.masked_fill(torch.triu(torch.ones(6, 6), diagonal=1).bool(), -torch.inf)
    out["In[23].masked"] = masked
    attn_weights = torch.softmax(masked / keys.shape[-1]**0.5, dim=1)
    out["In[24].attn_weights"] = out["In[25].attn_weights"] = attn_weights
    torch.manual_seed(123)
    dropout = torch.nn.Dropout(0.5)
    out["In[26].dropout(ones)"] = dropout(torch.ones(6, 6))
    torch.manual_seed(123)
    out["In[27].dropout(attn_weights)"] = dropout(attn_weights)
    batch = torch.stack((inputs, inputs), dim=0)
    torch.manual_seed(123)
    out["In[30].CausalAttention"] = CausalAttentionAsRun(3, 2, 6, 0.0)(batch)
    torch.manual_seed(123)
    heads = [CausalAttentionAsRun(3, 2, 6, 0.0) for _ in range(2)]
    out["In[33].MultiHeadAttentionWrapper"] = torch.cat([head(batch) for head in heads], dim=-1)
    torch.manual_seed(123)
    x = torch.tensor([[0.43, 0.15, 0.89, 0.55, 0.87, 0.66], [0.57, 0.85, 0.64, 0.22, 0.58, 0.33],
                      [0.77, 0.25, 0.10, 0.05, 0.80, 0.55]])
    out["In[62].MultiHeadAttention"] = attention.MultiHeadAttention(6, 6, 3, 0.0, 2)(torch.stack((x, x), dim=0))
    save(golden_path("walkthrough_003"), {k: v.detach() for k, v in out.items()}, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
