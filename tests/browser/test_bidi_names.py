"""An agent name with bidirectional controls, or in a right-to-left script, on the consent
page in a real Chromium: the words around the name keep their order on screen
(tests/advisories/test_bidi_names.py has the why and the HTML half).

Positions, not pixels: each word's box comes from a DOM Range over its characters.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By

from tests.browser.support import (
    BRAND_NAME,
    open_consent,
    screenshot,
    serve_site,
    sign_in,
)

#: The box of the first `text` in `element`'s text, as {left, right, top} over its characters.
BOX_OF = """
const [element, text] = arguments;
const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
let nodes = [], whole = "";
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  nodes.push([node, whole.length]); whole += node.data;
}
const at = whole.indexOf(text);
if (at < 0) return null;
const range = document.createRange();
function point(offset, end) {
  for (const [node, start] of nodes) {
    if (offset < start + node.data.length || (end && offset === start + node.data.length)) {
      return [node, offset - start];
    }
  }
}
range.setStart(...point(at, false));
range.setEnd(...point(at + text.length, true));
const rects = Array.from(range.getClientRects()).filter((r) => r.width > 0);
return {
  left: Math.min(...rects.map((r) => r.left)),
  right: Math.max(...rects.map((r) => r.right)),
  top: Math.min(...rects.map((r) => r.top)),
};
"""


def box(browser: WebDriver, text: str, where: str = "h1") -> dict[str, float]:
    """The box of `text` in the element the CSS selector `where` finds."""
    element = browser.find_element(By.CSS_SELECTOR, where)
    found: dict[str, float] | None = browser.execute_script(BOX_OF, element, text)
    assert found is not None, f"{text!r} is not in {element.text!r}"
    return found


def in_reading_order(browser: WebDriver, *words: str, where: str = "h1") -> None:
    """`words` sit on one line of `where` (the heading), each to the right of the one before."""
    boxes = [box(browser, word, where) for word in words]
    assert len({round(b["top"]) for b in boxes}) == 1, boxes
    for before, after in itertools.pairwise(boxes):
        assert before["right"] <= after["left"] + 0.5, (words, boxes)


@pytest.mark.timeout(60)
def test_an_override_in_a_name_does_not_turn_the_sentence_around(
    browser: WebDriver, tmp_path: Path
) -> None:
    # "Helper Access to", then an override never closed: it used to run on to the end of the
    # heading, so "wants to act for you at Acme" read backwards.
    name = "Helper \u202eot sseccA"
    with serve_site(tmp_path, agent_name=name) as site:
        sign_in(browser, site)
        open_consent(browser, site, "orders:read")
        screenshot(browser, "bidi-override-in-name.png")
        in_reading_order(browser, "Helper", "wants", "act", "for", "you")
        # The name is what it is: inside it, the override still reverses its own letters.
        in_reading_order(browser, "Helper", "sseccA", "wants")
        assert BRAND_NAME.split()[0] in browser.find_element(By.TAG_NAME, "h1").text


@pytest.mark.timeout(60)
def test_an_arabic_name_reads_right_to_left_and_leaves_the_sentence_alone(
    browser: WebDriver, tmp_path: Path
) -> None:
    first, second = "مساعد", "شخصي"
    with serve_site(tmp_path, agent_name=f"{first} {second} 2") as site:
        sign_in(browser, site)
        open_consent(browser, site, "orders:read")
        screenshot(browser, "bidi-arabic-name.png")
        # Right to left within the name: its first word rightmost, the number at its end
        # leftmost; the whole name before the English sentence that follows it.
        in_reading_order(browser, "2", second, first, "wants", "act", "for", "you")


@pytest.mark.timeout(60)
def test_an_override_in_the_brand_name_does_not_turn_the_sentence_around(
    browser: WebDriver, tmp_path: Path
) -> None:
    # The Brand's display name went into "You are signed in to ... as ..." bare: an override
    # left open in it ran on to the end of the sentence, so "as jane@example.com." read
    # backwards, the person's address before the word that introduces it.
    with serve_site(tmp_path, brand_name="Acme \u202eporS") as site:
        sign_in(browser, site)
        open_consent(browser, site, "orders:read")
        screenshot(browser, "bidi-override-in-brand-name.png")
        in_reading_order(browser, "signed", "Acme", " as ", "jane", where="p.muted")
        in_reading_order(browser, "Demo", "wants", "act", "Acme")
