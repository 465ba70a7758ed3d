mkdir -p shop/src/shop shop/tests shop/docs/api && echo '# shop' > shop/README.md && echo '__version__ = "0.1.0"' > shop/src/shop/__init__.py && : > shop/src/shop/cli.py
