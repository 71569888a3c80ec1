from . import ext

if __name__ == "__main__":
    ext.serve()
