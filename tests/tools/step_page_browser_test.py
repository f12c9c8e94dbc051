"""The step page in a real browser: Debian's headless Chromium, driven over the Chrome DevTools
protocol (on a pipe: no port, no network), opens the page of `walkthrough`'s seed 003 step from a
file, clicks a node, steps through backward with the arrow keys and checks the values the page shows
against the numbers `attograd walkthrough` prints, and on a `--tangent` page the tangent beside the
value. Saves a screenshot of each view (graph.png, node_panel.png, backward_stepping.png,
tangent_panel.png) in SHOTS. Exit 77 (skipped) without Chromium.
    step_page_browser_test.py ATTOGRAD SHOTS"""
import base64
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from step_page_common import close, leaf_named, make_page, node_of_scope, printed_gradient, walkthrough_printout

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--remote-debugging-pipe", "--window-size=1400,900"]
failures = 0


def expect(name, ok, detail=""):
    global failures
    print(("OK " if ok else "NOT OK ") + name + ("" if ok else ": " + str(detail)))
    failures += 0 if ok else 1


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands in) and 4 (replies out), NUL-separated JSON."""

    def __init__(self, chromium, profile):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # Chromium reads fd 3 and writes fd 4. The child's ends go above 10 first, so that moving them
        # to 3 and 4 never overwrites the other; the pipes are close-on-exec, the copies at 3 and 4 not.
        child_r, child_w = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)

        def pipes():
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)
        self.process = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        preexec_fn=pipes, close_fds=False, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(child_r)
        os.close(child_w)
        self.next_id, self.buffer, self.events, self.session = 0, b"", [], None

    def close(self):
        """Ends Chromium and every process it started (its own session): TERM, then KILL what is left."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                continue

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, timeout=30, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, x, y):
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def key(self, key, key_code):
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=key_code)

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))


def shown_values(browser, role):
    """The numbers in the panel's value table of the first summary with this role."""
    cells = browser.evaluate(f"""[...document.querySelectorAll('#panel .summary[data-role="{role}"]')]
        .slice(0, 1).flatMap(s => [...s.querySelectorAll('table.values td')].map(td => td.textContent))""")
    return [float(c) for c in cells]


def click_element(browser, element_id):
    box = browser.evaluate(f"""(() => {{ const r = document.getElementById('{element_id}').getBoundingClientRect();
        return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
    browser.click(*box)


def click_node(browser, node_id):
    """Scrolls the node into view and clicks the middle of its shape, as a user would."""
    box = browser.evaluate(f"""(() => {{
        const g = [...document.querySelectorAll('g.node')].find(g => g.querySelector('title').textContent === 'n{node_id}');
        g.scrollIntoView({{block: 'center', inline: 'center'}});
        const r = g.querySelector('ellipse, polygon').getBoundingClientRect();
        return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
    browser.click(*box)


def main(attograd, tmp, shots):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIPPED: no Chromium (Debian package chromium; tools/setup.sh installs it)")
        return 77
    os.makedirs(shots, exist_ok=True)
    page = os.path.join(tmp, "step.html")
    data = make_page(attograd, page)
    printed = walkthrough_printout(attograd)
    browser = Browser(chromium, os.path.join(tmp, "profile"))
    try:
        target = next(t for t in browser.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        browser.session = browser.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
        browser.send("Page.enable")
        browser.send("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False)
        browser.send("Page.navigate", url="file://" + os.path.abspath(page))
        browser.wait_event("Page.loadEventFired")
        expect("the page draws every node", browser.evaluate("document.querySelectorAll('g.node').length")
               == len(data["nodes"]))
        browser.screenshot(os.path.join(shots, "graph.png"))

        # Click the node that computes context = attn_weights @ values: its panel shows its forward value.
        context = node_of_scope(data, "context")
        click_node(browser, context["id"])
        title = browser.evaluate("document.getElementById('panel-title').textContent")
        expect("clicking a node opens its panel", title == f"%{context['id']} matmul", title)
        expect("the panel shows the derivative", "dA = g Bᵀ" in browser.evaluate(
            "document.getElementById('panel-formula').textContent"))
        context_printed = printed["context (all tokens, SelfAttention_v1)"]
        expect("the panel's forward value is walkthrough's context", close(shown_values(browser, "value"),
               context_printed, 0.5e-4 + 1e-9), shown_values(browser, "value"))
        browser.screenshot(os.path.join(shots, "node_panel.png"))

        # Step through backward with → until the softmax runs: the gradient it shows is walkthrough's.
        softmax = node_of_scope(data, "attn_weights")
        steps = 0
        while f"%{softmax['id']} softmax" not in browser.evaluate("document.getElementById('step-label').textContent"):
            browser.key("ArrowRight", 39)
            steps += 1
            assert steps <= len(data["backward"]), "stepped past the end without reaching the softmax"
        expect(f"→ pressed {steps} times reaches the softmax at its place in the engine's order",
               data["backward"][steps - 1]["id"] == softmax["id"])
        expect("the gradient arriving at the softmax is walkthrough's", close(shown_values(browser, "grad"),
               printed_gradient(printed, "attn_weights"), 0.5e-4 + 1e-9), shown_values(browser, "grad"))

        # On to the step where the inputs have received two of their three gradients.
        inputs = leaf_named(data, "inputs")
        while browser.evaluate(f"""(() => {{ const b = [...document.querySelectorAll('text.badge')]
                .find(t => t.parentNode.querySelector('title').textContent === 'n{inputs['id']}');
                return b && b.style.display !== 'none' ? b.textContent : ''; }})()""") != "+2":
            browser.key("ArrowRight", 39)
            steps += 1
            assert steps <= len(data["backward"]), "the inputs never received two gradients"
        expect("stepping shows the inputs' second gradient arriving (badge +2)", True)
        click_element(browser, "zoom-fit")  # the whole graph in view
        browser.screenshot(os.path.join(shots, "backward_stepping.png"))

        # To the end (End key); the inputs' panel lists three gradients that add up to .grad.
        browser.key("End", 35)
        label = browser.evaluate("document.getElementById('step-label').textContent")
        expect("End runs the whole backward", label.startswith(f"step {len(data['backward'])} of"), label)
        click_node(browser, inputs["id"])
        received = browser.evaluate("document.getElementById('panel-received').textContent")
        expect("the inputs (used by queries, keys and values) received three gradients", received == "3", received)
        expect("inputs.grad shown is walkthrough's", close(shown_values(browser, "leaf-grad"),
               printed_gradient(printed, "inputs"), 0.5e-4 + 1e-9))

        # The page of a forward-mode forward (--tangent W_query): context's panel shows its tangent
        # beside its value (step_page_test.py checks those numbers against finite differences).
        tangent_page = os.path.join(tmp, "tangent.html")
        tangent_data = make_page(attograd, tangent_page, ("walkthrough", "--tangent", "W_query"))
        browser.send("Page.navigate", url="file://" + os.path.abspath(tangent_page))
        browser.wait_event("Page.loadEventFired")
        click_node(browser, node_of_scope(tangent_data, "context")["id"])
        expect("a --tangent page shows context's tangent", close(shown_values(browser, "tangent"),
               node_of_scope(tangent_data, "context")["tangent"]["values"], 0.5e-4 + 1e-9),
               shown_values(browser, "tangent"))
        browser.screenshot(os.path.join(shots, "tangent_panel.png"))
    finally:
        browser.close()
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:  # the page and a fresh Chromium profile
        sys.exit(main(sys.argv[1], tmp, sys.argv[2]))
