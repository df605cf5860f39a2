"""Catalogs a Brand's translator ships: compiled with Babel (.po entries -> .mo) and loaded,
for the tests of translated and right-to-left pages (provider and browser alike)."""

from __future__ import annotations

import gettext
import io

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo

__all__ = ["ARABIC", "catalog_for", "compiled"]


def compiled(catalog: Catalog) -> gettext.GNUTranslations:
    """`catalog` compiled to a .mo (with Babel) and loaded, as a Brand ships one."""
    buffer = io.BytesIO()
    write_mo(buffer, catalog)
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


#: Some of the pages' sentences in Arabic (a Brand's translator writes the markup a msgid has).
ARABIC = {
    "Connect your personal agent": "اربط وكيلك الشخصي",
    "Enter the code your personal agent showed you.": "أدخل الرمز الذي أظهره لك وكيلك الشخصي.",
    "Continue": "متابعة",
    "%(agent)s wants to act for you at %(brand)s": "يريد %(agent)s التصرف نيابةً عنك لدى %(brand)s",
    "The personal agent from <code>%(origin)s</code> is asking.": (
        "الوكيل الشخصي من <code>%(origin)s</code> هو من يطلب."
    ),
    "You are signed in to %(brand)s as <strong>%(who)s</strong>.": (
        "أنت مسجَّل الدخول إلى %(brand)s باسم <strong>%(who)s</strong>."
    ),
    "Untick anything you do not want to allow:": "ألغِ تحديد ما لا تريد السماح به:",
    "Allow": "السماح",
    "Deny": "الرفض",
    "Agents connected to %(brand)s": "الوكلاء المتصلون بـ %(brand)s",
    "From": "من",
    "Connected since": "متصل منذ",
    "Last used": "آخر استخدام",
    "Expires": "ينتهي",
    "It can:": "يمكنه:",
    "Revoke %(agent)s": "إلغاء %(agent)s",
    "These personal agents can act for you here. Revoking one stops it at its next request.": (
        "يمكن لهؤلاء الوكلاء الشخصيين التصرف نيابةً عنك هنا. إلغاء أحدهم يوقفه عند طلبه التالي."
    ),
    "Not yet": "ليس بعد",
    "Connected": "تم الاتصال",
    "You allowed %(agent)s to act for you at %(brand)s.": (
        "سمحت لـ %(agent)s بالتصرف نيابةً عنك لدى %(brand)s."
    ),
    "%(agent)s can now do this for you at %(brand)s until %(until)s:": (
        "يمكن لـ %(agent)s الآن فعل ما يلي نيابةً عنك لدى %(brand)s حتى %(until)s:"
    ),
    "You can revoke it at any time on your": "يمكنك إلغاؤه في أي وقت من",
    "connected agents page": "صفحة الوكلاء المتصلين",
    "You can close this page.": "يمكنك إغلاق هذه الصفحة.",
}


def catalog_for(language: str) -> gettext.GNUTranslations:
    """A catalog whose translator wrote `language` as the pages' language (msgid "en"), with
    a few words in it: Arabic ones for an Arabic tag, Hebrew for Hebrew, English otherwise."""
    catalog = Catalog(locale=language.replace("-", "_").split("_")[0], domain="pactmw")
    catalog.add("en", language)
    if language.startswith("ar"):
        for english, arabic in ARABIC.items():
            catalog.add(english, arabic)
    elif language.startswith("he"):
        catalog.add("Connect your personal agent", "חבר את הסוכן האישי שלך")
        catalog.add("Allow", "לאשר")
    return compiled(catalog)
