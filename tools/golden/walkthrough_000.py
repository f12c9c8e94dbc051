"""Seed 000's cells run by PyTorch 1.13 (each as its code is written), for the walkthrough test:
a printed number that PyTorch here reproduces, `attograd walkthrough --notebook 000` must
reproduce as well. Keys are "<cell>.<what>" as seeds/walkthrough_000.cpp names its checks.
Writes tests/golden/walkthrough_000.safetensors. Run: /usr/bin/python3 tools/golden/walkthrough_000.py
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from golden import golden_path, save


def main():
    out = {}
    torch.manual_seed(123)
    emb = nn.Embedding(6, 16)
    inputs = emb(torch.tensor([0, 4, 5, 2, 1, 3])).detach()
    token_2 = inputs[1]
    out["In[6].inputs"] = inputs
    out["In[14].token_2"] = token_2
    torch.manual_seed(123)
    W_query, W_key, W_value = torch.rand(24, 16), torch.rand(24, 16), torch.rand(28, 16)
    d_q = k_d = 24
    # cells 46-50: the first version
    query_2 = token_2.matmul(W_query.T)
    keys = W_key.matmul(inputs.T).T
    values = W_value.matmul(inputs.T).T
    out["In[48].omega_24"] = query_2.dot(keys[4])
    omega_2 = query_2.matmul(keys.T)
    out["In[49].omega_2"] = omega_2
    out["In[50].attention_weights2"] = F.softmax((omega_2 / d_q**0.5), dim=0)
    # cells 15-41: the second version
    query_2 = W_query.matmul(token_2)
    keys = W_key.matmul(inputs.T).T
    values = W_value.matmul(inputs.T).T
    out["In[21].omega24"] = query_2.dot(keys[4])
    omega2 = query_2.matmul(keys.T)
    out["In[23].omega2"] = omega2
    attention_weights2 = F.softmax((omega2 / (k_d**0.5)), dim=0)
    out["In[27].attention_weights2"] = attention_weights2
    out["In[41].context_2"] = attention_weights2.matmul(values)
    queries = W_query.matmul(inputs.T).T
    omega = queries.matmul(keys.T)
    out["In[33].omega"] = omega
    out["In[35].attention_weights"] = F.softmax((omega / (k_d**0.5)), dim=1)
    save(golden_path("walkthrough_000"), out, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
