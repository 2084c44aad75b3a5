"""Write data/support_tickets.jsonl: short support messages over five labels, made for this project.

Each label has hand-written openings and details that are combined, so the set is varied but
reproducible (fixed seed). Run: python data/make_support_tickets.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SEED = 7
PER_LABEL = 60

PARTS = {
    "billing": (
        [
            "I was charged twice",
            "My invoice is wrong",
            "Why did my card get billed",
            "Please refund",
            "The VAT number on the receipt is missing",
            "I see an extra fee",
            "My subscription renewed at the wrong price",
            "The discount code was not applied",
            "Can you send a corrected invoice",
            "I cancelled but was still charged",
            "The annual plan price changed",
            "My payment failed although the card is valid",
        ],
        [
            "for the March statement.",
            "on my credit card this month.",
            "for the team plan.",
            "after I downgraded.",
            "and I need it fixed before our accounts close.",
            "for the last two billing periods.",
            "even though we only have three seats.",
            "and the amount in euros looks off.",
            "on order 48213.",
            "for a plan we never used.",
        ],
    ),
    "bug_report": (
        [
            "The app crashes",
            "Exporting to PDF produces a blank file",
            "The dashboard shows an error 500",
            "Search returns no results",
            "The upload button does nothing",
            "Notifications arrive twice",
            "The page freezes",
            "Charts do not render",
            "Saving a draft loses my changes",
            "The mobile app closes itself",
            "Dark mode makes the text invisible",
            "Sorting by date is broken",
        ],
        [
            "when I open the settings page.",
            "since the last update.",
            "on Firefox and Chrome.",
            "every time I click save.",
            "with files larger than 10 MB.",
            "on Android 14.",
            "after about five minutes of use.",
            "when the list has more than 100 rows.",
            "and the console shows a stack trace.",
            "only in the reports section.",
        ],
    ),
    "account_access": (
        [
            "I cannot log in",
            "The password reset email never arrives",
            "My account is locked",
            "Two-factor codes are rejected",
            "I lost access to my authenticator app",
            "Single sign-on fails",
            "I need to change the email on my account",
            "My session expires immediately",
            "The login page says my user does not exist",
            "I was logged out of every device",
            "Please unlock the admin account",
            "The verification link has expired",
        ],
        [
            "and I have a deadline today.",
            "after I changed my phone.",
            "for our whole team.",
            "even after clearing cookies.",
            "since this morning.",
            "with our Google Workspace account.",
            "although the password is correct.",
            "and support chat needs a login too.",
            "on my new laptop.",
            "after too many attempts.",
        ],
    ),
    "feature_request": (
        [
            "It would be great to have",
            "Could you add",
            "Please consider supporting",
            "We would love",
            "Is there a plan to offer",
            "Our team needs",
            "A nice improvement would be",
            "Please build",
            "I would pay extra for",
            "Any chance of getting",
            "We are missing",
            "Would you consider adding",
        ],
        [
            "an export to Excel.",
            "a public API for reports.",
            "keyboard shortcuts for the editor.",
            "custom fields on tasks.",
            "a calendar integration.",
            "dark mode on the web app.",
            "bulk editing of contacts.",
            "webhooks for new orders.",
            "more languages in the interface.",
            "scheduled reports by email.",
        ],
    ),
    "shipping": (
        [
            "My package has not arrived",
            "The tracking number does not work",
            "The parcel was delivered to the wrong address",
            "The box arrived damaged",
            "Can I change the delivery address",
            "My order is stuck in customs",
            "The courier left no notice",
            "Only half of my order arrived",
            "Delivery is two weeks late",
            "Can I pick up the order at a store",
            "The shipping cost seems too high",
            "The item was returned to sender",
        ],
        [
            "for order 55120.",
            "and I need it by Friday.",
            "although the status says delivered.",
            "and the courier will not answer.",
            "to Berlin.",
            "since last Tuesday.",
            "with express shipping.",
            "for the second time.",
            "and the gift was for a birthday.",
            "from the warehouse in Lyon.",
        ],
    ),
}


def make(seed: int = SEED, per_label: int = PER_LABEL) -> list[dict[str, str]]:
    rng = random.Random(seed)
    rows = []
    for label, (openings, details) in PARTS.items():
        pairs = [(o, d) for o in openings for d in details]
        for opening, detail in rng.sample(pairs, per_label):
            rows.append({"text": f"{opening} {detail}", "label": label})
    rng.shuffle(rows)
    return rows


if __name__ == "__main__":
    target = Path(__file__).with_name("support_tickets.jsonl")
    target.write_text("".join(json.dumps(row) + "\n" for row in make()))
    print(f"wrote {target}")
