# A tutorial marquee on a real cloud (workflow.md W5): a Hetzner Cloud
# server with its own SSH key and an acme-dns account for its TLS
# certificate. Every cloud choice is a variable; the outputs are the ones
# `warden callback --verb deployed --connection-from` reads, the same as
# ../local, which stands in for this module offline.
#
# Not run in tests (it needs provider downloads and a cloud account); the
# local flavour runs the same workflow end to end.

terraform {
  required_version = ">= 1.5"
  required_providers {
    hcloud = {
      source  = "hetznercloud/hcloud"
      version = "~> 1.48"
    }
    tls = {
      source  = "hashicorp/tls"
      version = "~> 4.0"
    }
    http = {
      source  = "hashicorp/http"
      version = "~> 3.4"
    }
  }
}

variable "marquee_id" {
  type        = string
  description = "The marquee this infrastructure belongs to (warden's id)."
}

variable "generation" {
  type        = number
  description = "The dispatch's generation: a redeploy replaces the server."
}

variable "server_type" {
  type    = string
  default = "cx22"
}

variable "location" {
  type    = string
  default = "nbg1"
}

variable "image" {
  type    = string
  default = "debian-12"
}

variable "ssh_user" {
  type    = string
  default = "root"
}

variable "base_domain" {
  type        = string
  description = "The zone the marquee's free domain is made in, e.g. marquees.example.org."
}

variable "acme_dns_server_url" {
  type        = string
  description = "The acme-dns server that proves the domain for TLS."
}

resource "tls_private_key" "ssh" {
  algorithm = "ED25519"
}

resource "hcloud_ssh_key" "marquee" {
  name       = "${var.marquee_id}-${var.generation}"
  public_key = tls_private_key.ssh.public_key_openssh
}

resource "hcloud_server" "marquee" {
  name        = "${var.marquee_id}-${var.generation}"
  server_type = var.server_type
  location    = var.location
  image       = var.image
  ssh_keys    = [hcloud_ssh_key.marquee.id]
  labels = {
    warden_marquee    = var.marquee_id
    warden_generation = tostring(var.generation)
  }
}

# One acme-dns account per server: registration is an unauthenticated POST
# that answers the account's credentials.
data "http" "acme_dns_register" {
  url    = "${var.acme_dns_server_url}/register"
  method = "POST"
  lifecycle {
    postcondition {
      condition     = self.status_code == 201 || self.status_code == 200
      error_message = "acme-dns registration failed"
    }
  }
}

locals {
  acme = jsondecode(data.http.acme_dns_register.response_body)
}
