// Certificates made at test time with the OpenSSL API: a self-signed CA and leaves it
// signs, written as PEM files into a temporary directory.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <goro/net/tls.hpp>

namespace goro::net::testing {

class TestPki {
 public:
  // Makes the CA. Throws on OpenSSL failures (test setup, not the code under test).
  TestPki() {
    char tmpl[] = "/tmp/goro-net-pki-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    ca_key_ = EVP_EC_gen("P-256");
    ca_ = make_cert(ca_key_, "goro test CA", "", "", nullptr, nullptr, true);
    ca_file_ = dir_ + "/ca.pem";
    write_cert(ca_file_, ca_);
  }
  ~TestPki() {
    X509_free(ca_);
    EVP_PKEY_free(ca_key_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& ca_file() const { return ca_file_; }

  const std::string& dir() const { return dir_; }

  // A leaf for dns_names (the first is also the CN), signed by the CA, as PEM files.
  TlsCertificate leaf(const std::string& stem, const std::vector<std::string>& dns_names) {
    std::string san;
    for (const std::string& d : dns_names) san += (san.empty() ? "DNS:" : ",DNS:") + d;
    return issue(stem, dns_names.front(), san, "serverAuth");
  }

  // A client certificate: CN cn, subjectAltName san in OpenSSL's syntax
  // ("URI:spiffe://example.org/web,email:a@example.org"), extended key usage clientAuth.
  TlsCertificate client_leaf(const std::string& stem, const std::string& cn,
                             const std::string& san) {
    return issue(stem, cn, san, "clientAuth");
  }

 private:
  TlsCertificate issue(const std::string& stem, const std::string& cn, const std::string& san,
                       const std::string& eku) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = make_cert(key, cn, san, eku, ca_, ca_key_, false);
    std::string cert_file = dir_ + "/" + stem + ".pem";
    std::string key_file = dir_ + "/" + stem + ".key";
    write_cert(cert_file, cert);
    FILE* f = std::fopen(key_file.c_str(), "w");
    if (f == nullptr || PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
      throw std::runtime_error("write key");
    std::fclose(f);
    X509_free(cert);
    EVP_PKEY_free(key);
    return {cert_file, key_file};
  }

  static void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (ext == nullptr) throw std::runtime_error("extension");
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }

  static X509* make_cert(EVP_PKEY* key, const std::string& cn, const std::string& san,
                         const std::string& eku, X509* issuer, EVP_PKEY* issuer_key, bool is_ca) {
    static long serial = 1;
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
    X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
    X509* signer = issuer ? issuer : cert;
    if (is_ca) {
      add_ext(cert, signer, NID_basic_constraints, "critical,CA:TRUE");
      add_ext(cert, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
      add_ext(cert, signer, NID_subject_key_identifier, "hash");
    } else {
      add_ext(cert, signer, NID_basic_constraints, "critical,CA:FALSE");
      add_ext(cert, signer, NID_key_usage, "critical,digitalSignature");
      add_ext(cert, signer, NID_ext_key_usage, eku);
      add_ext(cert, signer, NID_subject_alt_name, san);
    }
    if (X509_sign(cert, issuer_key ? issuer_key : key, EVP_sha256()) == 0)
      throw std::runtime_error("sign");
    return cert;
  }

  static void write_cert(const std::string& path, X509* cert) {
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr || PEM_write_X509(f, cert) != 1) throw std::runtime_error("write cert");
    std::fclose(f);
  }

  std::string dir_;
  std::string ca_file_;
  EVP_PKEY* ca_key_ = nullptr;
  X509* ca_ = nullptr;
};

}  // namespace goro::net::testing
