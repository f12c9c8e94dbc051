"""What the step page tests share: the walkthrough's printed numbers and the page's embedded data."""
import json
import re
import subprocess

# The four leaves of `walkthrough`'s seed 003 step and the module scope of each computed step.
LEAVES = ["inputs", "W_query", "W_key", "W_value"]
STEPS = ["queries", "keys", "values", "attn_scores", "scaled", "attn_weights", "context"]


def parse_tensor(text):
    """The numbers of a printed tensor(...), row-major."""
    body = text[text.index("tensor(") + len("tensor("):]
    body = body[:body.rindex("]") + 1]
    return [float(v) for v in re.findall(r"-?\d+\.\d*(?:e[-+]?\d+)?|-?inf|nan", body)]


def walkthrough_printout(attograd):
    """`attograd walkthrough`'s printed blocks: {"name = ...": [numbers]} for every "NAME =\\ntensor(...)"."""
    out = subprocess.run([attograd, "walkthrough"], check=True, capture_output=True, text=True, timeout=120).stdout
    blocks = {}
    for m in re.finditer(r"^([^\n]+?) =\n(tensor\(.*?\)(?:, dtype=f64\))?)", out, re.M | re.S):
        blocks.setdefault(m.group(1), parse_tensor(m.group(2)))
    return blocks


def printed_gradient(blocks, step):
    """The gradient the walkthrough prints for a leaf ("inputs") or a step's scope ("queries")."""
    for name, values in blocks.items():
        if name.startswith("d context.sum() / d " + step + " ") or name == "d context.sum() / d " + step:
            return values
    raise KeyError("walkthrough printed no gradient for " + step)


def make_page(attograd, path, task=("walkthrough",)):
    subprocess.run([attograd, "graph", *task, "--format", "html", "--out", path], check=True, capture_output=True,
                   timeout=600)
    return page_data(path)


def page_data(path):
    """The JSON the page embeds (its <script id="step-data">)."""
    with open(path, encoding="utf-8") as f:
        html = f.read()
    start = html.index('<script type="application/json" id="step-data">')
    start = html.index(">", start) + 1
    return json.loads(html[start:html.index("</script>", start)])


def node_of_scope(data, scope):
    found = [n for n in data["nodes"] if n["scope"] == scope and not n["leaf"]]
    assert len(found) == 1, f"expected one node in scope {scope}, found {len(found)}"
    return found[0]


def leaf_named(data, name):
    return next(n for n in data["nodes"] if n["leaf"] and n["name"] == name)


def close(a, b, tolerance):
    return len(a) == len(b) and all(abs(x - y) <= tolerance for x, y in zip(a, b))
